package leak_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/leak"
)

// snippetTruth is what the snippet-v2 recordings (testdata/gpu/<name>/
// truth.json) planted.
type snippetTruth struct {
	Expect struct {
		Leak bool `json:"leak"`
	} `json:"expect"`
	Leak *struct {
		Kind             string `json:"kind"`
		BytesPerStep     int64  `json:"bytes_per_step"`
		FirstLeakingStep int64  `json:"first_leaking_step"`
		Site             *struct {
			File string `json:"file"`
			Line int    `json:"line"`
		} `json:"site"`
		CallSite *struct {
			File string `json:"file"`
			Line int    `json:"line"`
		} `json:"call_site"`
		HoldingLine *struct {
			File string `json:"file"`
			Line int    `json:"line"`
		} `json:"holding_line"`
	} `json:"leak"`
}

// stepLogGrowthOver is what memory_allocated() grew per step over steps
// first..last (the run's own steps.jsonl, written after every step).
func stepLogGrowthOver(t *testing.T, path string, first, last int64) int64 {
	t.Helper()
	log := memtest.Decode(t, path, steplog.Read)
	at := map[int64]int64{}
	for _, r := range log.Series[0].Records {
		at[r.Step] = r.AllocatedBytes
	}
	a, okA := at[first-1]
	b, okB := at[last]
	if !okA || !okB || last < first {
		t.Fatalf("step log %s has no steps %d and %d", path, first-1, last)
	}
	return (b - a) / (last - first + 1)
}

// The recordings made for the leak verdict (snippet v2, H200): a leak that
// starts mid-window, a 512 KiB leak in a model churning GBs, healthy
// gradient accumulation, a clean run whose peak is far above its steady
// state, validation outputs kept with their graph, HF Trainer and
// Lightning runs. Trace and snapshot each give the planted verdict, kind
// and bytes per step, checked against the run's own step log; snapshots
// name the planted line in their chain.
func TestLeaksOnSnippetV2Recordings(t *testing.T) {
	for _, name := range []string{"late_start_leak", "small_leak_big_model", "grad_accum", "peak_above_steady",
		"eval_keeps_logits", "hf_trainer_leak", "hf_trainer_clean", "lightning_leak", "logged_memory_summary", "no_zero_grad"} {
		dir := filepath.Join(memtest.Testdata("gpu"), name)
		var truth snippetTruth
		memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
		steps := memtest.GlobOne(t, dir, "*.steps.jsonl")
		for _, kind := range []string{"trace", "snapshot"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				var in *rules.Input
				var rep leak.Report
				if kind == "trace" {
					in = &rules.Input{Source: name, Trace: memtest.Trace(t, memtest.GlobOne(t, dir, "*.pt.trace.json.gz"))}
					rep = in.Leaks()
				} else {
					in = &rules.Input{Source: name, Snapshot: memtest.Decode(t, memtest.GlobOne(t, dir, "*.snapshot.pickle.gz"), snapshot.Read)}
					rep = in.SnapshotLeaks()
				}
				if !truth.Expect.Leak {
					if rep.Verdict != leak.VerdictClean || rep.GrowthBytesPerStep != 0 {
						t.Fatalf("false alarm: %s %d (%s)", rep.Verdict, rep.GrowthBytesPerStep, rep.Reason)
					}
					return
				}
				if rep.Verdict != leak.VerdictLeak || len(rep.Leaks) != 1 {
					t.Fatalf("%s with %d leaks (%s)", rep.Verdict, len(rep.Leaks), rep.Reason)
				}
				l := rep.Leaks[0]
				wantKind := truth.Leak.Kind
				if kind == "snapshot" && (wantKind == leak.KindAutogradGraph || wantKind == leak.KindRetainGraph) {
					wantKind = leak.KindUnknown // no autograd graph in a snapshot: it cannot tell
				}
				if l.Kind != wantKind || l.BytesPerStep != truth.Leak.BytesPerStep {
					t.Errorf("%s %d bytes/step, planted %s %d (want kind %s)", l.Kind, l.BytesPerStep, truth.Leak.Kind, truth.Leak.BytesPerStep, wantKind)
				}
				// The step log's growth over the steps the leak was seen in.
				if logged := stepLogGrowthOver(t, steps, max(l.FirstStep, 1), l.LastStep); logged != l.BytesPerStep {
					t.Errorf("%d bytes/step over steps #%d..#%d, the step log grew %d", l.BytesPerStep, l.FirstStep, l.LastStep, logged)
				}
				if truth.Leak.FirstLeakingStep > 0 && l.FirstStep != truth.Leak.FirstLeakingStep {
					t.Errorf("leak found from step %d, it started at %d", l.FirstStep, truth.Leak.FirstLeakingStep)
				}
				if kind == "snapshot" {
					chain := strings.Join(l.Sites[0].Stack, " > ")
					var want []string
					for _, s := range []*struct {
						File string `json:"file"`
						Line int    `json:"line"`
					}{truth.Leak.HoldingLine, truth.Leak.CallSite, truth.Leak.Site} {
						if s != nil {
							want = append(want, fmt.Sprintf("%s(%d)", s.File, s.Line))
						}
					}
					found := false
					for _, w := range want {
						found = found || strings.Contains(chain, w)
					}
					if !found {
						t.Errorf("chain %s names none of %v", chain, want)
					}
				}
				// Regular is a leak at any size; the threshold sets severity.
				for _, f := range rules.Run(rules.Builtin(), in) {
					if f.Rule != "memory.leak" && f.Rule != "snapshot.leak" {
						continue
					}
					want := rules.Error
					if l.BytesPerStep < 1<<20 {
						want = rules.Warning
					}
					if f.Severity != want || !strings.Contains(f.Title, "("+l.Kind+")") {
						t.Errorf("finding %s %q, want %s", f.Severity, f.Title, want)
					}
				}
			})
		}
	}
}
