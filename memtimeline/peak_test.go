package memtimeline_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func formatSplit(ours, torch []memtimeline.Share) string {
	var b strings.Builder
	for i, s := range ours {
		fmt.Fprintf(&b, " %s %s/%s", s.Name, memtimeline.FormatBytes(s.Bytes), memtimeline.FormatBytes(torch[i].Bytes))
	}
	return b.String()
}

// peakRuns pair a trace with torch's own export_memory_timeline of the
// same profiler run.
var peakRuns = []struct{ name, trace, timeline string }{
	{"resnet_train_clean", memtest.Testdata("traces", "resnet_train_clean", "trace.json.gz"), memtest.Testdata("timeline", "resnet_train_clean", "memory_timeline.raw.json.gz")},
	{"big_transformer", memtest.Testdata("traces", "big_transformer", "trace.json.gz"), memtest.Testdata("timeline", "big_transformer", "memory_timeline.raw.json.gz")},
	{"compiled_model", memtest.Testdata("traces", "compiled_model", "trace.json.gz"), memtest.Testdata("timeline", "compiled_model", "memory_timeline.raw.json.gz")},
	{"leak_eval_no_grad", memtest.Testdata("traces", "leak_eval_no_grad", "trace.json.gz"), memtest.Testdata("timeline", "leak_eval_no_grad", "memory_timeline.raw.json.gz")},
	{"gpu/leak_hook_every_step", memtest.Testdata("gpu", "leak_hook_every_step", "trace.json.gz"), memtest.Testdata("gpu", "leak_hook_every_step", "memory_timeline.raw.json.gz")},
	{"gpu/leak_retain_graph", memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"), memtest.Testdata("gpu", "leak_retain_graph", "memory_timeline.raw.json.gz")},
	{"gpu/ddp_rank1", memtest.Testdata("gpu", "ddp_one_rank_leaks", "rank1", "trace.json.gz"), memtest.Testdata("gpu", "ddp_one_rank_leaks", "rank1", "memory_timeline.raw.json.gz")},
	{"gpu/amp", memtest.Testdata("gpu", "amp_item_sync_slow_loader", "trace.json.gz"), memtest.Testdata("gpu", "amp_item_sync_slow_loader", "memory_timeline.raw.json.gz")},
	{"gpu/oom", memtest.Testdata("gpu", "oom", "trace.json.gz"), memtest.Testdata("gpu", "oom", "memory_timeline.raw.json.gz")},
	{"gpu/diff_base", memtest.Testdata("gpu", "diff_pair", "base", "trace.json.gz"), memtest.Testdata("gpu", "diff_pair", "base", "memory_timeline.raw.json.gz")},
	{"gpu/diff_head_leak", memtest.Testdata("gpu", "diff_pair", "head_leak", "trace.json.gz"), memtest.Testdata("gpu", "diff_pair", "head_leak", "memory_timeline.raw.json.gz")},
}

func TestPeakCategoriesAgreeWithTorch(t *testing.T) {
	for _, run := range peakRuns {
		t.Run(run.name, func(t *testing.T) {
			tr := memtest.Trace(t, run.trace)
			tl, err := exported.ReadFile(filepath.Clean(run.timeline))
			if err != nil {
				t.Fatal(err)
			}
			c := memtimeline.PeakComposition(tr, chrometrace.Attribute(tr), memtimeline.Lifetimes(tr, -1), -1)
			if c == nil {
				t.Fatal("no composition")
			}
			if !c.CompareWithTorch(tl.SplitAt(c.TNs + tr.Meta.BaseTimeNanoseconds)) {
				t.Fatal("the peak is outside torch's timeline")
			}
			var torchTotal, torchUnknown int64
			for _, s := range c.Torch {
				torchTotal += s.Bytes
				if s.Name == "Unknown" { // torch's own name: torch's data keeps it
					torchUnknown = s.Bytes
				}
			}
			t.Logf("peak %s at %s (%s): agreement %.2f:%s", memtimeline.FormatBytes(c.AllocatedBytes), c.Step, c.Phase, c.Agreement, formatSplit(c.ByCategory, memtimeline.TorchAsComposition(c.Torch)))
			if torchUnknown*2 > torchTotal {
				t.Logf("torch itself leaves %s of %s uncategorized: no comparison", memtimeline.FormatBytes(torchUnknown), memtimeline.FormatBytes(torchTotal))
				return
			}
			if c.Agreement < 0.75 {
				t.Errorf("agreement with torch's categories %.2f, want >= 0.75", c.Agreement)
			}
			if !c.Estimated || c.Note == "" {
				t.Error("the composition does not say its categories are an estimate")
			}
		})
	}
}
