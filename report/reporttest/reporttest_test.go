package reporttest_test

import (
	"fmt"
	"testing"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/reporttest"
)

// fatalRecorder is a testing.TB that records Fatalf instead of stopping.
type fatalRecorder struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		doc    []byte
		wantOK bool
	}{
		{"startup error", report.Encode(report.StartupError(report.ErrBadInput, "bad flag")), true},
		{"cancelled run", report.Encode(report.Finish(report.Run{Check: "true", Cancelled: true}, nil)), true},
		{"result", report.Encode(report.Finish(report.Run{Check: "true", Passed: true, Grounded: true}, nil)), true},
		{"not JSON", []byte("{"), false},
		{"wrong shape", []byte(`{"schema":"goalrun/1","status":"success","conclusion":"success"}`), false},
		{"invalid UTF-8", []byte("{\"schema\":\"goalrun/1\xff\"}"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fatalRecorder{TB: t}
			reporttest.Validate(rec, tc.doc)
			if rec.failed == tc.wantOK {
				t.Errorf("Validate failed = %v (%s), want ok = %v", rec.failed, rec.msg, tc.wantOK)
			}
		})
	}
}

// TestDocumentBytes: the bound ValidateJSON checks is the one Encode keeps.
func TestDocumentBytes(t *testing.T) {
	if reporttest.DocumentBytes != report.DocumentBytes {
		t.Errorf("reporttest.DocumentBytes = %d, report.DocumentBytes = %d", reporttest.DocumentBytes, report.DocumentBytes)
	}
}
