package agent

import (
	"testing"

	"github.com/goalrun/goalrun/internal/lazyre"
)

// TestRegexpsCompile: every package-level regular expression this test
// binary links (declared with lazyre.New, compiled on first use) is valid,
// so none panics at its first use in a run.
func TestRegexpsCompile(t *testing.T) {
	if err := lazyre.CompileAll(); err != nil {
		t.Fatal(err)
	}
}
