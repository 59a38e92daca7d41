package rules

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

func readTrace(t testing.TB, name string) *chrometrace.Trace {
	t.Helper()
	return readTraceFile(t, filepath.Join("..", "testdata", "traces", name, "trace.json.gz"))
}

// stepLogGrowth measures growth per step independently of the trace: from
// torch.cuda.memory_allocated() logged after every step by the same run.
func stepLogGrowth(t *testing.T, name string) int64 {
	f, err := os.Open(filepath.Join("..", "testdata", "traces", name, "stats_steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log, err := memtimeline.ReadStepLog(f)
	if err != nil {
		t.Fatal(err)
	}
	a := memtimeline.AnalyzeSteps(log, memtimeline.DefaultStepOptions())
	return int64(a.Series[0].BytesPerStep)
}

func TestLeakVerdictsOnRealTraces(t *testing.T) {
	cases := []struct {
		name, verdict string
	}{
		{"leak_module_cache", VerdictLeak},
		{"leak_eval_no_grad", VerdictLeak},
		{"resnet_train_clean", VerdictClean},
		{"big_transformer", VerdictClean},
		{"compiled_model", VerdictClean},
		{"frag_small_allocs", VerdictClean}, // its two-step rolling window is steady state
		{"no_memory", VerdictUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := AnalyzeLeaks(readTrace(t, c.name), DefaultLeakOptions())
			if rep.Verdict != c.verdict {
				t.Fatalf("verdict %s (%s), want %s", rep.Verdict, rep.Reason, c.verdict)
			}
			if rep.Reason == "" {
				t.Error("no reason given")
			}
			if c.verdict == VerdictLeak {
				// Within 1% of the growth the run itself logged.
				want := stepLogGrowth(t, c.name)
				if d := math.Abs(float64(rep.GrowthBytesPerStep-want)) / float64(want); d > 0.01 {
					t.Errorf("growth %d bytes/step, the step log says %d", rep.GrowthBytesPerStep, want)
				}
			}
			if c.verdict == VerdictClean && rep.GrowthBytesPerStep != 0 {
				t.Errorf("clean with growth %d", rep.GrowthBytesPerStep)
			}
		})
	}
}

func TestLeakSuspectIsThePlantedLine(t *testing.T) {
	var truth struct {
		LeakBytesPerStep int64 `json:"leak_bytes_per_step"`
	}
	data, err := os.ReadFile(filepath.Join("..", "testdata", "traces", "leak_module_cache", "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &truth); err != nil {
		t.Fatal(err)
	}
	rep := AnalyzeLeaks(readTrace(t, "leak_module_cache"), DefaultLeakOptions())
	top := rep.Suspects[0]
	if top.BytesPerStep != truth.LeakBytesPerStep || rep.GrowthBytesPerStep != truth.LeakBytesPerStep {
		t.Errorf("suspect %d bytes/step, growth %d; planted %d", top.BytesPerStep, rep.GrowthBytesPerStep, truth.LeakBytesPerStep)
	}
	if lastFrame(top.Stack) != "gen_traces.py(143): forward" || !strings.HasPrefix(top.Operator, "aten::clone") {
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
	tr := readTrace(t, "leak_module_cache")
	two := *tr
	two.Steps = tr.Steps[:2]
	if rep := AnalyzeLeaks(&two, DefaultLeakOptions()); rep.Verdict != VerdictUnknown || !strings.Contains(rep.Reason, "at least 3") {
		t.Errorf("two steps: %s (%s)", rep.Verdict, rep.Reason)
	}
	none := *tr
	none.Steps = nil
	rep := AnalyzeLeaks(&none, DefaultLeakOptions())
	if rep.Verdict != VerdictUnknown || !rep.WholeWindow || !strings.Contains(rep.Reason, "whole window") {
		t.Errorf("no steps: %s (%s)", rep.Verdict, rep.Reason)
	}
	if len(rep.Suspects) == 0 || rep.UnreleasedBytes == 0 {
		t.Error("whole-window fallback should still list what stays alive")
	}
}

// Raising the threshold above the planted growth turns the verdict clean:
// the threshold is what decides, not a special case.
func TestLeakThreshold(t *testing.T) {
	opts := DefaultLeakOptions()
	opts.MinBytesPerStep = 8 << 20
	if rep := AnalyzeLeaks(readTrace(t, "leak_module_cache"), opts); rep.Verdict != VerdictClean {
		t.Errorf("verdict %s with an 8 MiB threshold", rep.Verdict)
	}
}
