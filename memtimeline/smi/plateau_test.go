package smi

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// smoothLoad is a 200 ms smi log of one process: idle 5 s, memory.used
// rising 100 MiB/s for load seconds as smoothly as a leak (from_pretrained
// fills memory tensor by tensor), flat for flat seconds with the GPU busy,
// then the exit.
func smoothLoad(load, flat float64) string {
	var b strings.Builder
	b.WriteString("timestamp, index, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := 0; float64(i)*0.2 < 5+load+flat+5; i++ {
		t := float64(i) * 0.2
		used, util := 0, 0
		switch {
		case t < 5:
		case t < 5+load:
			used, util = 500+int((t-5)*100), 5
		case t < 5+load+flat:
			used, util = 500+int(load*100), 95
		}
		fmt.Fprintf(&b, "%s, 0, %d MiB, 81920 MiB, %d %%\n", t0.Add(time.Duration(t*float64(time.Second))).Format("2006/01/02 15:04:05.000"), used, util)
	}
	return b.String()
}

// TestGrowthThenPlateauIsNoLeak: growth that stops and holds flat at least
// as long as it grew, the process alive, is a load or a cache filled once,
// not a leak, however smooth; the same growth followed by a shorter flat
// stretch is still one (a leak cut short by the end of the job).
func TestGrowthThenPlateauIsNoLeak(t *testing.T) {
	for _, tc := range []struct {
		name       string
		load, flat float64
		leak       bool
	}{
		{"20 s load, 60 s training", 20, 60, false},
		{"60 s load, 90 s training", 60, 90, false},
		{"60 s growth, 15 s flat, exit", 60, 15, true},
		{"60 s growth to the exit", 60, 0, true},
	} {
		a := Analyze(readSMIString(t, smoothLoad(tc.load, tc.flat)), DefaultOptions())
		g := a.GPUs[0]
		if got := len(g.Leaks) > 0; got != tc.leak {
			t.Errorf("%s: leak %v, want %v (runs %+v)", tc.name, got, tc.leak, g.Runs)
			continue
		}
		if !tc.leak && (len(g.Runs) != 1 || !strings.Contains(g.Runs[0].Reason, "not a leak") || !strings.Contains(g.Runs[0].Reason, "then flat for")) {
			t.Errorf("%s: runs %+v, want the plateau given as the reason", tc.name, g.Runs)
		}
	}
}
