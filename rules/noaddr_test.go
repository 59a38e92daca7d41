package rules

import (
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/leak"
)

// torch 1.8/1.9 traces record no Addr and no totals: the allocated bytes
// at each step's end (the running sum of Bytes) are still a step series,
// and the growth model reads it as it reads a steps log's. The traces are
// real torch 2.11 recordings rewritten into the 1.8 schema
// (testdata/gpu/torch18_schema/derive.py); the planted figures are the
// sources' truth.json.
func TestLeakFromTorch18StepSeries(t *testing.T) {
	var truth struct {
		Leak struct {
			BytesPerStep int64 `json:"bytes_per_step"`
			First        int64 `json:"first_leaking_step"`
		} `json:"leak"`
	}
	memtest.ReadJSON(t, memtest.Testdata("gpu", "late_start_leak", "truth.json"), &truth)
	dir := memtest.Testdata("gpu", "torch18_schema")
	in := loadInput(t, dir+"/late_start_leak/vm_472_20261201-080107_rank0_step12.pt.trace.json.gz")
	if s := in.Trace.MemorySchema; s.WithoutAddr == 0 || !s.DerivedAllocated || !s.NoReserved {
		t.Fatalf("schema %+v: the derived trace should read as torch 1.8's", s)
	}
	rep := in.Leaks()
	if rep.Verdict != leak.VerdictLeak || rep.GrowthBytesPerStep != truth.Leak.BytesPerStep {
		t.Fatalf("leak %s, %d B/step, want %d: %s", rep.Verdict, rep.GrowthBytesPerStep, truth.Leak.BytesPerStep, rep.Reason)
	}
	if g := rep.StepSeries; g == nil || g.GrowthFirst != truth.Leak.First || g.GrowthLast != 11 || len(g.Points) != 10 {
		t.Errorf("series %+v, want growth from step %d to 11 over 10 points", g, truth.Leak.First)
	}
	vs := judgeAll([]*Input{in})
	if len(vs) != 1 {
		t.Fatalf("%d verdicts", len(vs))
	}
	v := vs[0].Leak
	if v.Verdict != leak.VerdictLeak || v.BytesPerStep != truth.Leak.BytesPerStep || v.Location != nil {
		t.Errorf("verdict %s %d B/step at %v: %s", v.Verdict, v.BytesPerStep, v.Location, v.Reason)
	}
	if !strings.Contains(v.StackNote+v.Reason, "no Addr") {
		t.Errorf("the answer does not say why no line is named: %q / %q", v.StackNote, v.Reason)
	}
	// The kind is not recorded: the checklist's kind items are not passed.
	seen := 0
	for _, it := range Checklist(vs[0], nil) {
		if it.ID == "eval-no-grad" || it.ID == "kept-in-lists" {
			seen++
		}
		if (it.ID == "eval-no-grad" || it.ID == "kept-in-lists") && it.Status != CheckNotMeasurable {
			t.Errorf("checklist %s is %s with the leak's kind unknown: %s", it.ID, it.Status, it.Detail)
		}
	}
	if seen != 2 {
		t.Errorf("%d of the checklist's two kind items", seen)
	}
}

// The same derivation of a healthy run stays clean; a 3-step window stays
// unknown and says how many steps to profile.
func TestTorch18StepSeriesCleanAndShort(t *testing.T) {
	dir := memtest.Testdata("gpu", "torch18_schema")
	for _, c := range []struct{ path, verdict, why string }{
		{dir + "/grad_accum_clean/vm_542_20261201-080126_rank0_step14.pt.trace.json.gz", leak.VerdictClean, "stays flat over steps 2..13"},
		{dir + "/uneven_leak_late_3steps/run_rank0_step5.pt.trace.json.gz", leak.VerdictUnknown, "only 3 steps profiled (ProfilerStep#2..#4)"},
		// The TensorBoard plugin's resnet50 sample (real torch 1.8):
		// every step ends where the window began.
		{memtest.Testdata("public", "kineto_tb_plugin", "worker0.1623143089861.pt.trace.json.gz"), leak.VerdictClean, "stays flat over steps 5..10"},
	} {
		vs := judgeAll(loadInputs(t, c.path))
		if len(vs) != 1 {
			t.Fatalf("%s: %d verdicts", c.path, len(vs))
		}
		v := vs[0].Leak
		if v.Verdict != c.verdict || v.BytesPerStep != 0 || !strings.Contains(v.Reason, c.why) {
			t.Errorf("%s: %s %d B/step: %s; want %s with %q", c.path, v.Verdict, v.BytesPerStep, v.Reason, c.verdict, c.why)
		}
	}
}
