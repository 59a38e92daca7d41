package steplog

import (
	"math"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// FuzzReadStepLog: any input either fails with an error or gives a log
// whose invariants hold and which Analyze can analyze. Seeds are in
// testdata/fuzz/FuzzReadStepLog.
func FuzzReadStepLog(f *testing.F) {
	f.Add([]byte(`{"step": 0, "allocated": 1}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		log, ok := memtest.Accepts(t, Read, data)
		if !ok {
			return
		}
		n := 0
		for _, s := range log.Series {
			for i, r := range s.Records {
				if r.AllocatedBytes < 0 || (i > 0 && r.Step < s.Records[i-1].Step) {
					t.Fatalf("bad record %+v", r)
				}
			}
			n += len(s.Records)
		}
		if n != log.Lines || n == 0 {
			t.Fatalf("lines %d, records %d", log.Lines, n)
		}
		for _, s := range Analyze(log, DefaultOptions()).Series {
			switch s.Verdict {
			case VerdictGrowing, VerdictFlat, VerdictUnknown:
			default:
				t.Fatalf("verdict %q", s.Verdict)
			}
			if math.IsNaN(s.Allocated.R2) || math.IsNaN(s.Allocated.SlopeBytesPerStep) || math.IsInf(s.Allocated.SlopeBytesPerStep, 0) {
				t.Fatalf("bad trend %+v", s.Allocated)
			}
		}
	})
}
