package smi

import (
	"math"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// FuzzReadSMILog: any input either fails with an error or gives a log
// whose invariants hold and which Analyze can analyze. Seeds are in
// testdata/fuzz/FuzzReadSMILog (real log excerpts and every variant).
func FuzzReadSMILog(f *testing.F) {
	f.Add([]byte("index, timestamp, memory.used [MiB]\n0, 2026/11/29 17:26:22.516, 5 MiB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		log, ok := memtest.Accepts(t, Read, data)
		if !ok {
			return
		}
		rows := 0
		for _, g := range log.GPUs {
			if len(g.Samples) == 0 {
				t.Fatalf("GPU %s without samples", g.Key)
			}
			for i := 1; i < len(g.Samples); i++ {
				if g.Samples[i].Time.Before(g.Samples[i-1].Time) {
					t.Fatalf("GPU %s samples out of order", g.Key)
				}
			}
			rows += len(g.Samples)
		}
		if rows != log.Rows || rows == 0 {
			t.Fatalf("rows %d, samples %d", log.Rows, rows)
		}
		// Loose options make every growth a candidate, to exercise the
		// window search too.
		for _, o := range []Options{DefaultOptions(), {Threshold: 0.5, MinGrowthSamples: 2, MinGrowthRises: 1, MaxRiseFraction: 1, JitterFraction: 0.5}} {
			a := Analyze(log, o)
			for _, g := range a.GPUs {
				for _, r := range append(append([]GrowthRun{}, g.Runs...), g.Leaks...) {
					if r.End.Before(r.Start) || r.Samples < 2 || math.IsNaN(r.R2) || r.R2 < 0 || r.R2 > 1 || math.IsNaN(r.SlopeBytesPerSec) {
						t.Fatalf("bad run %+v", r)
					}
				}
				for _, p := range append(append([]Period{}, g.Starvation...), g.AboveThreshold.Periods...) {
					if p.Duration < 0 || p.Samples < 1 {
						t.Fatalf("bad period %+v", p)
					}
				}
			}
		}
	})
}
