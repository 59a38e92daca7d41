package steplog

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readRealLog reads the one steps log of a recording folder in testdata.
func readRealLog(t *testing.T, dir string) *Log {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join("../../testdata/gpu", dir, "*steps.jsonl*"))
	if len(paths) != 1 {
		t.Fatalf("%s: want one steps log, found %v", dir, paths)
	}
	f, err := os.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(paths[0], ".gz") {
		if r, err = gzip.NewReader(f); err != nil {
			t.Fatal(err)
		}
	}
	log, err := Read(r)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// The growth model on real H200 logs whose truth.json says what was
// planted: the verdict, the figure, the period, where growth starts, and
// the plateau after a bounded fill.
func TestGrowthRealLogs(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		dir          string
		verdict      string
		perStep      int64 // growing only
		period       int64
		first        int64 // the step growth starts at (growing only)
		boundedAfter int   // flat steps after a bounded rise, 0 none
	}{
		{"late_start_leak", VerdictGrowing, 4 * mib, 1, 6, 0},
		{"small_leak_big_model", VerdictGrowing, mib / 2, 1, 2, 0},
		{"evidence/trace_off_leak", VerdictGrowing, 256 << 10, 1, 2, 0},
		{"evidence/periodic_eval", VerdictGrowing, 8 * mib / 5, 5, 4, 0},
		{"evidence/bounded_queue_cap", VerdictFlat, 0, 1, 0, 21},
		{"evidence/seqlen_cache", VerdictFlat, 0, 1, 0, 26},
		{"grad_accum", VerdictFlat, 0, 0, 0, 0},
		{"evidence/frag_fraction", VerdictFlat, 0, 0, 0, 0},
		{"hf_trainer_clean", VerdictFlat, 0, 0, 0, 0},
		{"watch/periodic", VerdictGrowing, 8 * mib / 5, 5, 4, 0},
		{"watch/leak", VerdictGrowing, 4 * mib, 1, 10, 0},
		// A cache by sequence length filling at random: rises at
		// irregular steps, still rising: neither growth nor flat.
		{"watch/healthy", VerdictUnknown, 0, 0, 0, 0},
	}
	for _, c := range cases {
		rep := Analyze(readRealLog(t, c.dir), DefaultOptions()).Series[0]
		if rep.Verdict != c.verdict {
			t.Errorf("%s: verdict %s (%s), want %s", c.dir, rep.Verdict, rep.Reason, c.verdict)
			continue
		}
		g := rep.Growth
		switch {
		case c.verdict == VerdictGrowing:
			if g == nil || abs64(rep.BytesPerStep-c.perStep) > 1 || g.Period != c.period || g.FirstStep != c.first {
				t.Errorf("%s: %d B/step, growth %+v; want %d B/step, period %d from step %d", c.dir, rep.BytesPerStep, g, c.perStep, c.period, c.first)
			}
		case c.boundedAfter > 0:
			if g == nil || !g.Bounded || g.FlatAfter != c.boundedAfter {
				t.Errorf("%s: growth %+v; want bounded, flat for %d steps", c.dir, g, c.boundedAfter)
			}
		case g != nil:
			t.Errorf("%s: growth %+v, want none", c.dir, g)
		}
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
