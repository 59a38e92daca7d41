package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/zerograd"
)

// recording is a snippet-v2 recording: its one trace and its truth.
type recording struct {
	name, trace string
	truth       map[string]any
}

func recordings(t *testing.T) []recording {
	t.Helper()
	dirs, _ := filepath.Glob(memtest.Testdata("gpu", "*"))
	var out []recording
	for _, d := range dirs {
		traces, _ := filepath.Glob(filepath.Join(d, "*.pt.trace.json.gz"))
		if len(traces) != 1 {
			continue
		}
		r := recording{name: filepath.Base(d), trace: traces[0], truth: map[string]any{}}
		if data, err := os.ReadFile(filepath.Join(d, "truth.json")); err == nil {
			json.Unmarshal(data, &r.truth)
		}
		out = append(out, r)
	}
	if len(out) < 10 {
		t.Fatalf("only %d recordings", len(out))
	}
	return out
}

// expects reads truth.json's expect.<key> (false when absent).
func (r recording) expects(key string) bool {
	e, _ := r.truth["expect"].(map[string]any)
	v, _ := e[key].(bool)
	return v
}

// The missing zero_grad rule fires on the loop that never calls it and
// on no other recording: not on intended gradient accumulation (step and
// zero_grad every 4 micro-batches), not on the HF Trainer (model.zero_grad),
// not on any seed trace.
func TestMissingZeroGradOnRecordings(t *testing.T) {
	for _, r := range recordings(t) {
		fs := Run([]Rule{ruleNamed(t, ruleMissingZeroGrad)}, &Input{Trace: memtest.SharedTrace(t, r.trace)})
		if want := r.expects("missing_zero_grad"); (len(fs) > 0) != want {
			t.Errorf("%s: fired=%v, want %v: %+v", r.name, len(fs) > 0, want, fs)
			continue
		}
		if len(fs) == 0 {
			continue
		}
		f := fs[0]
		// 8 profiled steps, an optimizer step in each: 7 pairs, none reset,
		// 4 parameters accumulating in place in each.
		if f.Severity != Warning || f.Metrics["optimizer_steps"] != 8 || f.Metrics["intervals_without_reset"] != 7 || f.Metrics["in_place_accumulations"] != 28 ||
			f.Operator != "Optimizer.step#Adam.step" || f.Location == nil || f.Location.File != "no_zero_grad.py" || !strings.Contains(f.Advice, "zero_grad(set_to_none=True)") {
			t.Errorf("%s: %+v %v", r.name, f, f.Location)
		}
	}
	for _, name := range []string{"resnet_train_clean", "big_transformer", "compiled_model", "leak_module_cache"} {
		if fs := findingsFor(t, ruleMissingZeroGrad, name, 0); len(fs) != 0 {
			t.Errorf("%s: %+v", name, fs)
		}
	}
	// Intended accumulation: 3 optimizer steps, each with its zero_grad,
	// and fresh gradients after each reset.
	rep := zerograd.Analyze(memtest.Trace(t, recordingTrace(t, "grad_accum")))
	if rep.OptimizerSteps != 3 || rep.ZeroGrads != 3 || len(rep.Intervals) != 2 || rep.Offending != 0 || rep.Intervals[0].FreshGrads == 0 {
		t.Errorf("grad_accum: %+v", rep)
	}
}

func recordingTrace(t *testing.T, name string) string {
	t.Helper()
	m, _ := filepath.Glob(memtest.Testdata("gpu", name, "*.pt.trace.json.gz"))
	if len(m) != 1 {
		t.Fatalf("%s: %d traces", name, len(m))
	}
	return m[0]
}

// Resets the rule must see: a zero_grad(set_to_none=False) annotation
// (backward then adds into zeroed grads in place) and grads set to None
// by hand (backward installs fresh ones, no annotation).
func TestMissingZeroGradSynthetic(t *testing.T) {
	build := func(reset string) *Input {
		var s memtest.Synth
		for i := range 3 {
			base := float64(1000 * i)
			s.Step(i+1, base, 900)
			if reset == "annotation" {
				s.Host("user_annotation", "Optimizer.zero_grad#SGD.zero_grad", base+10, 5, 0)
			}
			s.Host("cpu_op", "torch::autograd::AccumulateGrad", base+100, 20, 0)
			if reset == "fresh" && i > 0 {
				s.Host("cpu_op", "aten::detach", base+105, 5, 0)
			} else {
				s.Host("cpu_op", "aten::add_", base+105, 5, 0)
			}
			s.Host("user_annotation", "Optimizer.step#SGD.step", base+500, 50, 0)
		}
		return &Input{Trace: s.Trace(t)}
	}
	r := ruleNamed(t, ruleMissingZeroGrad)
	if fs := Run([]Rule{r}, build("none")); len(fs) != 1 || fs[0].Metrics["intervals_without_reset"] != 2 {
		t.Errorf("no reset: %+v", fs)
	}
	for _, reset := range []string{"annotation", "fresh"} {
		if fs := Run([]Rule{r}, build(reset)); len(fs) != 0 {
			t.Errorf("reset by %s: %+v", reset, fs)
		}
	}
}

// Blocking uploads from pinned memory: the recording copying with
// .to("cuda") fires with the planted numbers, its non_blocking twin and
// the pageable, non_blocking and item-sync recordings do not.
func TestPinnedBlockingOnRecordings(t *testing.T) {
	blocking := memtest.Trace(t, recordingTrace(t, "pinned_blocking"))
	fs := Run([]Rule{ruleNamed(t, rulePinnedBlocking)}, &Input{Trace: blocking})
	var truth struct {
		Copies struct {
			Count int     `json:"count"`
			Bytes []int64 `json:"bytes"`
			Site  struct {
				File string `json:"file"`
			} `json:"site"`
		} `json:"copies_per_step"`
		Schedule struct {
			Active int `json:"active"`
		} `json:"schedule"`
	}
	memtest.ReadJSON(t, memtest.Testdata("gpu", "pinned_blocking", "truth.json"), &truth)
	var perStep int64
	for _, b := range truth.Copies.Bytes {
		perStep += b
	}
	if len(fs) != 1 {
		t.Fatalf("pinned_blocking: %+v", fs)
	}
	m := fs[0].Metrics
	if int(m["copies"]) != truth.Copies.Count*truth.Schedule.Active || int64(m["bytes_per_step"]) != perStep || m["fraction_of_steps"] != 1 ||
		fs[0].Location == nil || fs[0].Location.File != truth.Copies.Site.File || !strings.Contains(fs[0].Advice, "non_blocking=True") {
		t.Errorf("metrics %v at %v, truth %d copies of %d B per step over %d steps", m, fs[0].Location, truth.Copies.Count, perStep, truth.Schedule.Active)
	}
	for _, p := range []string{
		recordingTrace(t, "pinned_nonblocking"),
		memtest.Testdata("gpu", "amp_item_sync_slow_loader", "trace.json.gz"),
		memtest.Testdata("gputimeline", "slow_loader_pinned", "trace.json.gz"),
		memtest.Testdata("gputimeline", "copies_item_sync", "trace.json.gz"),
	} {
		if fs := Run([]Rule{ruleNamed(t, rulePinnedBlocking)}, &Input{Trace: memtest.Trace(t, p)}); len(fs) != 0 {
			t.Errorf("%s: %+v", p, fs)
		}
	}
}
