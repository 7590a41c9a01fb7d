package goal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDescribeFailingOutputAttributesPackages: go test ./... prints each
// package's "--- FAIL" blocks followed by its own "FAIL\tpkg" line; every
// failing test is named with the package it failed in (real output of two
// failing packages, testdata/checkoutput/go-two-packages.txt).
func TestDescribeFailingOutputAttributesPackages(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "checkoutput", "go-two-packages.txt"))
	if err != nil {
		t.Fatal(err)
	}
	two := string(b)
	failures := FailureLines(two)
	cut := two[:strings.Index(two, "FAIL\tgithub.com/stretchr/testify/assert")] // assert's blocks without its package line
	for _, tc := range []struct {
		name  string
		parts []string
		want  string
	}{
		{"two packages", []string{two},
			"TestDirExists and TestEventuallyWithTTrue failing in github.com/stretchr/testify/assert; TestSuiteRequireTwice and TestSuiteLogging failing in github.com/stretchr/testify/suite"},
		{"the failing-test lines and the tail, read apart", []string{failures, two},
			"TestDirExists and TestEventuallyWithTTrue failing in github.com/stretchr/testify/assert; TestSuiteRequireTwice and TestSuiteLogging failing in github.com/stretchr/testify/suite"},
		{"a package line in another part is not borrowed", []string{cut, "--- FAIL: TestSuiteLogging (0.00s)\nFAIL\tgithub.com/stretchr/testify/suite\t0.003s\n"},
			"TestSuiteLogging failing in github.com/stretchr/testify/suite; TestDirExists and TestEventuallyWithTTrue failing"},
		{"the tail kept only the last package", []string{failures, two[strings.Index(two, "--- FAIL: TestSuiteRequireTwice"):]},
			"TestSuiteRequireTwice and TestSuiteLogging failing in github.com/stretchr/testify/suite; TestDirExists and TestEventuallyWithTTrue failing"},
		{"one package", []string{"--- FAIL: TestWords (0.00s)\n    words_test.go:9: bad\nFAIL\nFAIL\texample.com/words\t0.004s\nFAIL\n"},
			"TestWords failing in example.com/words"},
		{"no package line falls back", []string{"--- FAIL: TestWords (0.00s)\n"}, "TestWords failing"},
		{"a panic beside the tests", []string{"--- FAIL: TestA (0.00s)\npanic: boom\nFAIL\texample.com/a\t0.004s\n"},
			"TestA failing in example.com/a and a panic (boom)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DescribeFailingOutput(tc.parts...)
			if tc.name == "two packages" {
				// FailureFingerprint's description reads the output whole.
				if _, d := FailureFingerprint(1, false, two); !strings.HasSuffix(d, got) {
					t.Errorf("fingerprint description %q does not end with %q", d, got)
				}
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
