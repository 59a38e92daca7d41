package steplog

import (
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
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

// The four real leaks issue #38 reports the old rule missing, rebuilt on a
// real healthy log (hf_trainer_clean: its allocated and requested bytes
// after every step) with the allocator's uneven rounding in allocated
// bytes; requested bytes carry the exact leak. Each is judged with and
// without requested bytes in the log.
func TestIssue38Cases(t *testing.T) {
	const mib = 1 << 20
	bg := readRealLog(t, "hf_trainer_clean").Series[0].Records
	rng := rand.New(rand.NewPCG(38, 4))
	// build returns n records on bg's level: kept(step) is the leak's
	// bytes after step, noise(step) the allocator's extra in allocated.
	build := func(n int, kept func(s int) int64, noise func(s int) int64, requested bool) *Log {
		s := &Series{}
		for i := range n {
			b := bg[min(i, len(bg)-1)]
			r := b
			r.Step = int64(i)
			r.RequestedBytes = -1
			if requested {
				r.RequestedBytes = b.RequestedBytes + kept(i)
			}
			r.AllocatedBytes = b.AllocatedBytes + kept(i) + noise(i)
			s.Records = append(s.Records, r)
		}
		return &Log{Series: []*Series{s}}
	}
	uneven := map[int]int64{}
	// 1: 4 MiB a step from step 12 to 44, allocated rising 2..6 MiB a step.
	var acc int64
	for s := 12; s <= 44; s++ {
		acc += int64(2+rng.IntN(5)) * mib
		uneven[s] = acc - int64(s-11)*4*mib
	}
	plusMinus2 := func(int) int64 { return int64(rng.IntN(3)-1) * 2 * mib }
	cases := []struct {
		name   string
		n      int
		kept   func(s int) int64
		noise  func(s int) int64
		start  int64 // 0: any
		period int64
		jump   int64 // 0: any
	}{
		{"keeps 4 MiB from step 12, uneven 2-6 MiB rises", 45, func(s int) int64 { return int64(max(0, s-11)) * 4 * mib },
			func(s int) int64 { return uneven[s] }, 12, 1, 0},
		{"torch.compile keeps logits, 11 steps", 12, func(s int) int64 { return int64(s) * 4 * mib },
			func(s int) int64 { return int64(rng.IntN(5)-2) * mib * int64(min(s, 1)) }, 0, 1, 0},
		{"eval every 5 steps keeps 8 MiB", 40, func(s int) int64 { return int64((s+1)/5) * 8 * mib }, plusMinus2, 4, 5, 8 * mib},
		{"optimizer re-created every 10 steps", 45, func(s int) int64 { return int64(s/10) * 131 * mib }, plusMinus2, 10, 10, 131 * mib},
	}
	for _, c := range cases {
		for _, req := range []bool{true, false} {
			rep := Analyze(build(c.n, c.kept, c.noise, req), DefaultOptions()).Series[0]
			g := rep.Growth
			name := fmt.Sprintf("%s (requested %v)", c.name, req)
			if rep.Verdict != VerdictGrowing || g == nil {
				t.Errorf("%s: %s (%s), want growing", name, rep.Verdict, rep.Reason)
				continue
			}
			t.Logf("%s: %s", name, rep.Reason)
			if !req {
				continue // allocated: the verdict only; the figures from requested
			}
			if (c.start > 0 && g.FirstStep != c.start) || g.Period != c.period || (c.jump > 0 && g.JumpBytes != c.jump) {
				t.Errorf("%s: growth %+v (%s); want from step %d, period %d, jump %d", name, g, rep.Reason, c.start, c.period, c.jump)
			}
		}
	}
}
