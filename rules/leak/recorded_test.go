package leak_test

import (
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// Traces recorded for this project on an H200 (testdata/gpu, see its
// README): leak patterns beyond the shared ones, so the detector is proven
// general rather than tuned to one file.

type gpuTruth struct {
	LeakBytesPerStep int64  `json:"leak_bytes_per_step"`
	LeakOp           string `json:"leak_op"`
	LeakFrame        string `json:"leak_frame"`
	LeakSite         struct {
		File string `json:"file"`
		Line int    `json:"line"`
	} `json:"leak_site"`
}

func readGPUTruth(t testing.TB, rel string) gpuTruth {
	var tr gpuTruth
	memtest.ReadJSON(t, memtest.Testdata("gpu", rel, "truth.json"), &tr)
	return tr
}

func TestLeakVerdictsOnRecordedPatterns(t *testing.T) {
	for _, rel := range []string{
		"leak_hook_every_step",      // a forward hook registered every step keeps a clone
		"leak_retain_graph",         // backward(retain_graph=True) with the loss kept
		"ddp_one_rank_leaks/rank1",  // the DDP rank that leaks
		"ddp_one_rank_leaks/rank0",  // its clean peer
		"diff_pair/base",            // clean
		"diff_pair/head",            // clean, wider activations
		"diff_pair/head_leak",       // a module cache
		"amp_item_sync_slow_loader", // clean, slow
		"oom",                       // an OOM, no leak
	} {
		t.Run(rel, func(t *testing.T) {
			truth := readGPUTruth(t, rel)
			rep := leak.Analyze(leak.TraceData(memtest.GPUTrace(t, rel), -1), leak.DefaultOptions())
			if truth.LeakBytesPerStep == 0 {
				if rep.Verdict == leak.VerdictLeak {
					t.Fatalf("false alarm: %s", rep.Reason)
				}
				return
			}
			if rep.Verdict != leak.VerdictLeak || rep.GrowthBytesPerStep != truth.LeakBytesPerStep {
				t.Fatalf("%s, %d bytes/step (%s); planted %d", rep.Verdict, rep.GrowthBytesPerStep, rep.Reason, truth.LeakBytesPerStep)
			}
			top := rep.Suspects[0]
			if truth.LeakOp != "" && !strings.HasPrefix(top.Operator, truth.LeakOp) {
				t.Errorf("suspect operator %q, planted %q", top.Operator, truth.LeakOp)
			}
			if truth.LeakFrame != "" && memtest.LastFrame(top.Stack) != truth.LeakFrame {
				t.Errorf("suspect frame %q, planted %q", memtest.LastFrame(top.Stack), truth.LeakFrame)
			}
			if loc := site.LocationOf(top.Stack); truth.LeakSite.File != "" && (loc == nil || loc.File != truth.LeakSite.File) {
				t.Errorf("suspect in %v, planted in %s", loc, truth.LeakSite.File)
			}
		})
	}
}
