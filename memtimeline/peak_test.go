package memtimeline

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

// torchCategory maps export_memory_timeline's categories to ours: the
// batch (INPUT) is held like an activation, autograd's bookkeeping is
// temporary.
var torchCategory = map[string]string{
	"PARAMETER": CatParameter, "OPTIMIZER_STATE": CatOptimizerState, "INPUT": CatActivation,
	"TEMPORARY": CatTemporary, "ACTIVATION": CatActivation, "GRADIENT": CatGradient,
	"AUTOGRAD_DETAIL": CatTemporary, "Unknown": CatUnknown,
}

// torchSplitAt is torch's category split at ts: the last timeline point at
// or before ts.
func torchSplitAt(tl *CategoryTimeline, ts int64) map[string]int64 {
	i := -1
	for k, t := range tl.Times {
		if t <= ts {
			i = k
		}
	}
	out := map[string]int64{}
	if i < 0 {
		return out
	}
	for k, name := range tl.Categories {
		out[torchCategory[name]] += tl.Bytes[k][i]
	}
	return out
}

// categoryAgreement is 1 minus the total variation distance between the
// two splits as fractions of their totals: 1 when the shares are equal, 0
// when they share nothing.
func categoryAgreement(ours []Share, torch map[string]int64) float64 {
	var to, tt float64
	for _, s := range ours {
		to += float64(s.Bytes)
	}
	for _, v := range torch {
		tt += float64(v)
	}
	if to == 0 || tt == 0 {
		return 0
	}
	var d float64
	for _, s := range ours {
		d += math.Abs(float64(s.Bytes)/to - float64(torch[s.Name])/tt)
	}
	return 1 - d/2
}

func formatSplit(ours []Share, torch map[string]int64) string {
	var b strings.Builder
	for _, s := range ours {
		fmt.Fprintf(&b, " %s %s/%s", s.Name, FormatBytes(s.Bytes), FormatBytes(torch[s.Name]))
	}
	return b.String()
}

func readTracePath(t testing.TB, path string) *chrometrace.Trace {
	t.Helper()
	in, err := chrometrace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tr, err := chrometrace.Read(in, chrometrace.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// peakRuns pair a trace with torch's own export_memory_timeline of the
// same profiler run.
var peakRuns = []struct{ name, trace, timeline string }{
	{"resnet_train_clean", "../testdata/traces/resnet_train_clean/trace.json.gz", "../testdata/timeline/resnet_train_clean/memory_timeline.raw.json.gz"},
	{"big_transformer", "../testdata/traces/big_transformer/trace.json.gz", "../testdata/timeline/big_transformer/memory_timeline.raw.json.gz"},
	{"compiled_model", "../testdata/traces/compiled_model/trace.json.gz", "../testdata/timeline/compiled_model/memory_timeline.raw.json.gz"},
	{"leak_eval_no_grad", "../testdata/traces/leak_eval_no_grad/trace.json.gz", "../testdata/timeline/leak_eval_no_grad/memory_timeline.raw.json.gz"},
	{"gpu/leak_hook_every_step", "../testdata/gpu/leak_hook_every_step/trace.json.gz", "../testdata/gpu/leak_hook_every_step/memory_timeline.raw.json.gz"},
	{"gpu/leak_retain_graph", "../testdata/gpu/leak_retain_graph/trace.json.gz", "../testdata/gpu/leak_retain_graph/memory_timeline.raw.json.gz"},
	{"gpu/ddp_rank1", "../testdata/gpu/ddp_one_rank_leaks/rank1/trace.json.gz", "../testdata/gpu/ddp_one_rank_leaks/rank1/memory_timeline.raw.json.gz"},
	{"gpu/amp", "../testdata/gpu/amp_item_sync_slow_loader/trace.json.gz", "../testdata/gpu/amp_item_sync_slow_loader/memory_timeline.raw.json.gz"},
	{"gpu/oom", "../testdata/gpu/oom/trace.json.gz", "../testdata/gpu/oom/memory_timeline.raw.json.gz"},
	{"gpu/diff_base", "../testdata/gpu/diff_pair/base/trace.json.gz", "../testdata/gpu/diff_pair/base/memory_timeline.raw.json.gz"},
	{"gpu/diff_head_leak", "../testdata/gpu/diff_pair/head_leak/trace.json.gz", "../testdata/gpu/diff_pair/head_leak/memory_timeline.raw.json.gz"},
}

func TestPeakCategoriesAgreeWithTorch(t *testing.T) {
	for _, run := range peakRuns {
		t.Run(run.name, func(t *testing.T) {
			tr := readTracePath(t, run.trace)
			tl, err := ReadExportedTimeline(filepath.Clean(run.timeline))
			if err != nil {
				t.Fatal(err)
			}
			c := PeakComposition(tr, chrometrace.Attribute(tr), Lifetimes(tr, -1), -1)
			if c == nil {
				t.Fatal("no composition")
			}
			torch := torchSplitAt(tl, c.TNs+tr.Meta.BaseTimeNanoseconds)
			// Torch's timeline counts tensors only: allocator blocks that
			// are no tensor (cuBLAS workspaces) are the constant difference
			// between the allocator's total and the timeline's, and sit in
			// our unknown share; leave them out of the comparison.
			var torchTotal int64
			for _, v := range torch {
				torchTotal += v
			}
			ours := slices.Clone(c.ByCategory)
			if extra := c.AllocatedBytes - torchTotal; extra > 0 {
				for i := range ours {
					if ours[i].Name == CatUnknown {
						ours[i].Bytes -= min(extra, ours[i].Bytes)
					}
				}
			}
			a := categoryAgreement(ours, torch)
			t.Logf("peak %s at %s (%s): agreement %.2f:%s", FormatBytes(c.AllocatedBytes), c.Step, c.Phase, a, formatSplit(ours, torch))
			if torch[CatUnknown]*2 > torchTotal {
				t.Logf("torch itself leaves %s of %s uncategorized: no comparison", FormatBytes(torch[CatUnknown]), FormatBytes(torchTotal))
				return
			}
			if a < 0.75 {
				t.Errorf("agreement with torch's categories %.2f, want >= 0.75", a)
			}
			if !c.Estimated || c.Note == "" {
				t.Error("the composition does not say its categories are an estimate")
			}
		})
	}
}
