package leak_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/leak"
)

// stepLogGrowth measures growth per step independently of the trace: from
// torch.cuda.memory_allocated() logged after every step by the same run.
func stepLogGrowth(t *testing.T, name string) int64 {
	log := memtest.Decode(t, memtest.Testdata("traces", name, "stats_steps.jsonl"), steplog.Read)
	a := steplog.Analyze(log, steplog.DefaultOptions())
	return int64(a.Series[0].BytesPerStep)
}

func TestLeakVerdictsOnRealTraces(t *testing.T) {
	cases := []struct {
		name, verdict string
	}{
		{"leak_module_cache", leak.VerdictLeak},
		{"leak_eval_no_grad", leak.VerdictLeak},
		{"resnet_train_clean", leak.VerdictClean},
		{"big_transformer", leak.VerdictClean},
		{"compiled_model", leak.VerdictClean},
		{"frag_small_allocs", leak.VerdictClean}, // its two-step rolling window is steady state
		{"no_memory", leak.VerdictUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := leak.Analyze(leak.TraceData(memtest.NamedTrace(t, c.name), -1), leak.DefaultOptions())
			if rep.Verdict != c.verdict {
				t.Fatalf("verdict %s (%s), want %s", rep.Verdict, rep.Reason, c.verdict)
			}
			if rep.Reason == "" {
				t.Error("no reason given")
			}
			if c.verdict == leak.VerdictLeak {
				// Within 1% of the growth the run itself logged.
				want := stepLogGrowth(t, c.name)
				if d := math.Abs(float64(rep.GrowthBytesPerStep-want)) / float64(want); d > 0.01 {
					t.Errorf("growth %d bytes/step, the step log says %d", rep.GrowthBytesPerStep, want)
				}
			}
			if c.verdict == leak.VerdictClean && rep.GrowthBytesPerStep != 0 {
				t.Errorf("clean with growth %d", rep.GrowthBytesPerStep)
			}
		})
	}
}

func TestLeakSuspectIsThePlantedLine(t *testing.T) {
	var truth struct {
		LeakBytesPerStep int64 `json:"leak_bytes_per_step"`
	}
	memtest.ReadJSON(t, memtest.Testdata("traces", "leak_module_cache", "truth.json"), &truth)
	rep := leak.Analyze(leak.TraceData(memtest.NamedTrace(t, "leak_module_cache"), -1), leak.DefaultOptions())
	top := rep.Suspects[0]
	if top.BytesPerStep != truth.LeakBytesPerStep || rep.GrowthBytesPerStep != truth.LeakBytesPerStep {
		t.Errorf("suspect %d bytes/step, growth %d; planted %d", top.BytesPerStep, rep.GrowthBytesPerStep, truth.LeakBytesPerStep)
	}
	if memtest.LastFrame(top.Stack) != "gen_traces.py(143): forward" || !strings.HasPrefix(top.Operator, "aten::clone") {
		t.Errorf("suspect %v via %s", top.Stack, top.Operator)
	}
	if len(rep.Suspects) != 1 {
		t.Errorf("%d suspects; the gradients of the last step are steady state, not suspects", len(rep.Suspects))
	}
	for _, s := range rep.Steps[:len(rep.Steps)-2] {
		if s.SurvivorBytes != truth.LeakBytesPerStep || s.SurvivorBlocks != 1 {
			t.Errorf("%s keeps %d bytes in %d blocks", s.Name, s.SurvivorBytes, s.SurvivorBlocks)
		}
	}
}

func TestLeakNeedsSteps(t *testing.T) {
	tr := memtest.NamedTrace(t, "leak_module_cache")
	two := *tr
	two.Steps = tr.Steps[:2]
	if rep := leak.Analyze(leak.TraceData(&two, -1), leak.DefaultOptions()); rep.Verdict != leak.VerdictUnknown || !strings.Contains(rep.Reason, "at least 3") {
		t.Errorf("two steps: %s (%s)", rep.Verdict, rep.Reason)
	}
	none := *tr
	none.Steps = nil
	rep := leak.Analyze(leak.TraceData(&none, -1), leak.DefaultOptions())
	if rep.Verdict != leak.VerdictUnknown || !rep.WholeWindow || !strings.Contains(rep.Reason, "whole window") {
		t.Errorf("no steps: %s (%s)", rep.Verdict, rep.Reason)
	}
	if len(rep.Suspects) == 0 || rep.UnreleasedBytes == 0 {
		t.Error("whole-window fallback should still list what stays alive")
	}
}

// The threshold does not decide the verdict: a regular leak under it is
// still a leak, reported as a warning.
func TestLeakThreshold(t *testing.T) {
	opts := leak.DefaultOptions()
	opts.MinBytesPerStep = 8 << 20
	if rep := leak.Analyze(leak.TraceData(memtest.NamedTrace(t, "leak_module_cache"), -1), opts); rep.Verdict != leak.VerdictLeak {
		t.Errorf("verdict %s with an 8 MiB threshold", rep.Verdict)
	}
}

// plantedBlocks returns the Memory indices of the allocations that the
// leak_module_cache trace never frees at its planted site (aten::clone),
// one per step, in time order.
func plantedBlocks(t *testing.T, tr *chrometrace.Trace) []int32 {
	t.Helper()
	attr := chrometrace.Attribute(tr)
	var out []int32
	for _, lt := range memtimeline.Lifetimes(tr, -1) {
		if lt.State == memtimeline.Unreleased && strings.HasPrefix(strings.Join(attr.OpChain(int(lt.Alloc)), " > "), "aten::clone") {
			out = append(out, lt.Alloc)
		}
	}
	if len(out) != 6 {
		t.Fatalf("%d planted blocks, want one per step (6)", len(out))
	}
	return out
}

// editedTrace copies a trace so that a test can add memory events.
func editedTrace(tr *chrometrace.Trace) *chrometrace.Trace {
	c := *tr
	c.Memory = slices.Clone(tr.Memory)
	return &c
}

// freeAt frees the block allocated by Memory[i] at time ts.
func freeAt(tr *chrometrace.Trace, i int32, ts int64) {
	e := tr.Memory[i]
	e.TS, e.Bytes = ts, -e.Bytes
	tr.Memory = append(tr.Memory, e)
}

// keepCopies adds n more allocations like Memory[i], right after it, at
// fresh addresses, never freed.
func keepCopies(tr *chrometrace.Trace, i int32, n int, bytes int64) {
	for k := 0; k < n; k++ {
		e := tr.Memory[i]
		e.TS += int64(k + 1)
		e.Addr = 0x7f0000000000 + uint64(len(tr.Memory))<<24
		if bytes > 0 {
			e.Bytes = bytes
		}
		tr.Memory = append(tr.Memory, e)
	}
}

// Edits of the real leak_module_cache trace (its own blocks, ops and
// stacks, only frees or copies added) for the patterns the recordings
// lack: each case is judged by regularity, not size.
func TestLeakRegularityOnEditedTraces(t *testing.T) {
	base := memtest.NamedTrace(t, "leak_module_cache")
	steps := slices.Clone(base.Steps)
	slices.SortFunc(steps, func(a, b chrometrace.Step) int { return int(a.Start - b.Start) })
	cases := []struct {
		name         string
		edit         func(tr *chrometrace.Trace, planted []int32)
		verdict      string
		bytesPerStep int64
		firstStep    int64
		accelerating bool
	}{
		{"as recorded", func(*chrometrace.Trace, []int32) {}, leak.VerdictLeak, 4 << 20, 2, false},
		{"starts mid-window: the first 3 steps free their block", func(tr *chrometrace.Trace, p []int32) {
			for _, i := range p[:3] {
				freeAt(tr, i, tr.Memory[i].TS+1000)
			}
		}, leak.VerdictLeak, 4 << 20, 5, false},
		{"only the last 2 steps keep it: outputs, not a leak", func(tr *chrometrace.Trace, p []int32) {
			for _, i := range p[:4] {
				freeAt(tr, i, tr.Memory[i].TS+1000)
			}
		}, leak.VerdictClean, 0, 0, false},
		{"a rolling buffer of 3 steps: each block freed 3 steps later", func(tr *chrometrace.Trace, p []int32) {
			for k, i := range p[:3] {
				freeAt(tr, i, steps[k+3].Start+10)
			}
		}, leak.VerdictClean, 0, 0, false},
		{"kept once (step 3 only): one-time state", func(tr *chrometrace.Trace, p []int32) {
			for k, i := range p {
				if k != 1 {
					freeAt(tr, i, tr.Memory[i].TS+1000)
				}
			}
		}, leak.VerdictClean, 0, 0, false},
		{"accelerating: k blocks at step k", func(tr *chrometrace.Trace, p []int32) {
			for k, i := range p {
				keepCopies(tr, i, k, 0)
			}
		}, leak.VerdictLeak, 14 << 20, 2, true},
		{"small: 512 KiB per step", func(tr *chrometrace.Trace, p []int32) {
			for _, i := range p {
				freeAt(tr, i, tr.Memory[i].TS+1000)
				keepCopies(tr, i, 1, 512<<10)
			}
		}, leak.VerdictLeak, 512 << 10, 2, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := editedTrace(base)
			c.edit(tr, plantedBlocks(t, base))
			rep := leak.Analyze(leak.TraceData(tr, -1), leak.DefaultOptions())
			if rep.Verdict != c.verdict {
				t.Fatalf("verdict %s (%s), want %s", rep.Verdict, rep.Reason, c.verdict)
			}
			if rep.GrowthBytesPerStep != c.bytesPerStep {
				t.Errorf("%d bytes/step, want %d (%s)", rep.GrowthBytesPerStep, c.bytesPerStep, rep.Reason)
			}
			if c.verdict != leak.VerdictLeak {
				return
			}
			if len(rep.Leaks) != 1 {
				t.Fatalf("%d leaks, want 1: %+v", len(rep.Leaks), rep.Leaks)
			}
			l := rep.Leaks[0]
			if l.FirstStep != c.firstStep || l.Accelerating != c.accelerating || l.Kind != leak.KindContainer {
				t.Errorf("leak from step %d (want %d), accelerating %v (want %v), kind %s", l.FirstStep, c.firstStep, l.Accelerating, c.accelerating, l.Kind)
			}
			if c.accelerating && (l.AccelerationBytes != 4<<20 || !strings.Contains(rep.Reason, "accelerating")) {
				t.Errorf("acceleration %d bytes/step/step; reason %q", l.AccelerationBytes, rep.Reason)
			}
		})
	}
}

// Each recorded leak gets its kind from the trace's own evidence
// (autograd sequence numbers, backward ops, Python call counts), one
// finding per leak with its sites inside, and a full call chain.
func TestLeakKindsOnRealTraces(t *testing.T) {
	cases := []struct {
		path, kind string
		sites      int // at least
		evidence   string
	}{
		{memtest.Testdata("traces", "leak_module_cache", "trace.json.gz"), leak.KindContainer, 1, "nothing of an autograd graph"},
		{memtest.Testdata("traces", "leak_eval_no_grad", "trace.json.gz"), leak.KindAutogradGraph, 10, "no backward ran"},
		{memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"), leak.KindRetainGraph, 4, "backward ran"},
		{memtest.Testdata("gpu", "leak_hook_every_step", "trace.json.gz"), leak.KindHook, 1, "hook ran 3,4,5,6,7,8 times"},
		{memtest.Testdata("gpu", "ddp_one_rank_leaks", "rank1", "trace.json.gz"), leak.KindContainer, 1, "nothing of an autograd graph"},
		{memtest.Testdata("gpu", "diff_pair", "head_leak", "trace.json.gz"), leak.KindContainer, 1, "nothing of an autograd graph"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			in := &rules.Input{Source: c.path, Trace: memtest.Trace(t, c.path)}
			rep := in.Leaks()
			if len(rep.Leaks) != 1 {
				t.Fatalf("%d leaks, want 1: %+v", len(rep.Leaks), rep.Leaks)
			}
			l := rep.Leaks[0]
			if l.Kind != c.kind || len(l.Sites) < c.sites || !strings.Contains(l.Evidence, c.evidence) || l.Fix == "" {
				t.Errorf("kind %s with %d sites, evidence %q; want %s, >= %d sites, %q", l.Kind, len(l.Sites), l.Evidence, c.kind, c.sites, c.evidence)
			}
			if l.BytesPerStep != rep.GrowthBytesPerStep {
				t.Errorf("leak %d bytes/step, report %d", l.BytesPerStep, rep.GrowthBytesPerStep)
			}
			for _, s := range rep.Suspects {
				if s.Kind != c.kind || s.Evidence == "" || s.Fix == "" || s.FirstStep < 0 {
					t.Errorf("suspect %s: kind %q evidence %q steps #%d..#%d", s.Site, s.Kind, s.Evidence, s.FirstStep, s.LastStep)
				}
				if !strings.Contains(s.StackNote, "before profiling started") {
					t.Errorf("suspect %s: the note does not say which frames carry the line where profiling began: %q", s.Site, s.StackNote)
				}
				// The chain starts at the script's outermost frame.
				if len(s.Stack) < 3 || !strings.HasSuffix(s.Stack[0], ": <module>") {
					t.Errorf("suspect %s: chain %v does not start at <module>", s.Site, s.Stack)
				}
			}
			var fs []rules.Finding
			for _, f := range rules.Run(rules.Builtin(), in) {
				if f.Rule == "memory.leak" {
					fs = append(fs, f)
				}
			}
			if len(fs) != 1 || !strings.Contains(fs[0].Title, "("+c.kind+")") || fs[0].Metrics["bytes_per_step"] != float64(l.BytesPerStep) {
				t.Errorf("findings %+v, want one %s finding of %d bytes/step", fs, c.kind, l.BytesPerStep)
			}
		})
	}
}

// Hooks piling up that each keep a copy: k blocks at step k. The recorded
// hook trace, edited so that every registered hook keeps its clone each
// call, is a hook leak that says it accelerates.
func TestAcceleratingHookLeak(t *testing.T) {
	base := memtest.Trace(t, memtest.Testdata("gpu", "leak_hook_every_step", "trace.json.gz"))
	tr := editedTrace(base)
	for k, i := range plantedBlocks(t, base) {
		keepCopies(tr, i, k+2, 0) // step #2 has 3 hooks registered, #3 four, ...
	}
	rep := leak.Analyze(leak.TraceData(tr, -1), leak.DefaultOptions())
	if len(rep.Leaks) != 1 {
		t.Fatalf("%d leaks: %s", len(rep.Leaks), rep.Reason)
	}
	l := rep.Leaks[0]
	if l.Kind != leak.KindHook || !l.Accelerating || l.AccelerationBytes != 2<<20 || !strings.Contains(rep.Reason, "accelerating") {
		t.Errorf("kind %s, accelerating %v by %d bytes/step/step (%s)", l.Kind, l.Accelerating, l.AccelerationBytes, rep.Reason)
	}
	var leakRule []rules.Rule
	for _, r := range rules.Builtin() {
		if r.ID == "memory.leak" {
			leakRule = append(leakRule, r)
		}
	}
	fs := rules.Run(leakRule, &rules.Input{Trace: tr})
	if len(fs) != 1 || !strings.Contains(fs[0].Title, "accelerating") || !strings.Contains(fs[0].Detail, "accelerates") {
		t.Errorf("findings %+v", fs)
	}
}

// withoutFrames is the trace with the Python frames of the named functions
// taken out, their children handed to their parents: how a hook that runs
// without a frame of its own (a lambda) records.
func withoutFrames(tr *chrometrace.Trace, function string) (*chrometrace.Trace, int) {
	c := *tr
	type key struct {
		thread chrometrace.ThreadID
		id     int32
	}
	parent := map[key]int32{}
	for _, f := range tr.PyFrames {
		if p, ok := chrometrace.ParseFrame(tr.Str(f.Name)); ok && p.Name == function {
			parent[key{f.Thread, f.ID}] = f.ParentID
		}
	}
	c.PyFrames = make([]chrometrace.PyFrame, 0, len(tr.PyFrames))
	for _, f := range tr.PyFrames {
		if _, gone := parent[key{f.Thread, f.ID}]; gone {
			continue
		}
		for {
			p, ok := parent[key{f.Thread, f.ParentID}]
			if !ok {
				break
			}
			f.ParentID = p
		}
		c.PyFrames = append(c.PyFrames, f)
	}
	return &c, len(parent)
}

// A module hook registered in every profiled step is a hook leak from the
// registration itself, whether or not the hook shows up as a frame; one
// registered once, before the window, keeps a container (testdata:
// evidence/hook_every_step, evidence/hook_once, leak_hook_every_step,
// round4/hook_lambda_traced (a lambda the profiler recorded), on the H200;
// a hook without a frame is the recorded trace with the hook's frames taken
// out).
func TestHookKindFromTheRegistration(t *testing.T) {
	cases := []struct {
		dir, file, hook, kind, evidence string
	}{
		{"evidence/hook_every_step", "run_rank0_step8.pt.trace.json.gz", "", leak.KindHook, "keep_output, a hook on the module that makes this memory, ran 3,4,5,6,7,8 times"},
		{"evidence/hook_every_step", "run_rank0_step8.pt.trace.json.gz", "keep_output", leak.KindHook, "register_forward_hook was called from evidence_cases.py(212): hook_every_step in each of steps #2..#7 (1,1,1,1,1,1 times)"},
		{"leak_hook_every_step", "trace.json.gz", "hook", leak.KindHook, "register_forward_hook was called from leak_hook_every_step.py(30): register_debug_hook in each of steps #2..#7"},
		{"round4/hook_lambda_traced", "run_rank0_step6.pt.trace.json.gz", "", leak.KindHook, "round4_cases.py(443): <lambda>, a hook on the module that makes this memory, ran 3,4,5,6 times"},
		{"round4/hook_lambda_traced", "run_rank0_step6.pt.trace.json.gz", "<lambda>", leak.KindHook, "register_forward_hook was called from round4_cases.py(442): body in each of steps #2..#5 (1,1,1,1 times)"},
		{"evidence/hook_once", "run_rank0_step8.pt.trace.json.gz", "", leak.KindContainer, "registered once: its calls do not grow"},
		{"evidence/hook_once", "run_rank0_step8.pt.trace.json.gz", "keep_output", leak.KindContainer, "a list, dict or cache keeps it"},
	}
	for _, c := range cases {
		t.Run(c.dir+"/"+c.hook, func(t *testing.T) {
			tr := memtest.Trace(t, memtest.Testdata("gpu", c.dir, c.file))
			if c.hook != "" {
				var n int
				if tr, n = withoutFrames(tr, c.hook); n == 0 {
					t.Fatalf("the trace has no frame of %s to take out", c.hook)
				}
			}
			rep := leak.Analyze(leak.TraceData(tr, -1), leak.DefaultOptions())
			if len(rep.Leaks) != 1 {
				t.Fatalf("%d leaks: %s", len(rep.Leaks), rep.Reason)
			}
			l := rep.Leaks[0]
			if l.Kind != c.kind || !strings.Contains(l.Evidence, c.evidence) || l.Fix == "" {
				t.Errorf("kind %s, evidence %q, fix %q; want %s, %q", l.Kind, l.Evidence, l.Fix, c.kind, c.evidence)
			}
			if l.BytesPerStep != 1<<20 && l.BytesPerStep != 2<<20 && l.BytesPerStep != 4<<20 {
				t.Errorf("%d bytes/step", l.BytesPerStep)
			}
		})
	}
}

func TestHookRegistrationFrames(t *testing.T) {
	for name, want := range map[string]string{
		"torch/nn/modules/module.py(1688): register_forward_hook":                                 "register_forward_hook",
		"torch/nn/modules/module.py(1620): register_full_backward_pre_hook":                       "register_full_backward_pre_hook",
		"/usr/lib/python3/dist-packages/torch/nn/modules/module.py(1460): register_backward_hook": "register_backward_hook",
		"leak_hook_every_step.py(30): register_debug_hook":                                        "",
		"train.py(12): register_forward_hook":                                                     "", // the user's own function of that name
		"torch/nn/modules/module.py(600): register_buffer":                                        "",
		"nn.Module: Linear_0": "",
	} {
		if got := chrometrace.HookRegistration(name); got != want {
			t.Errorf("HookRegistration(%q) = %q, want %q", name, got, want)
		}
	}
}
