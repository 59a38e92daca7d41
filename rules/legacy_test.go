package rules

import (
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
)

// A torch 1.8 trace (the TensorBoard plugin's resnet50 sample) records
// [memory] events with Bytes alone: the verdict says what that cannot
// tell (which step keeps memory, the cache's reserved memory) instead of
// a leak from blocks all paired at address 0 or a negative idle cache,
// and gives the peak as the running sum from the window's start.
func TestVerdictOnTorch18Trace(t *testing.T) {
	dir := memtest.Testdata("public", "kineto_tb_plugin")
	var truth struct {
		Peak map[string]int64 `json:"running_sum_peak"`
	}
	memtest.ReadJSON(t, dir+"/worker0.1623143089861.truth.json", &truth)
	vs := judgeAll(loadInputs(t, dir+"/worker0.1623143089861.pt.trace.json.gz"))
	if len(vs) != 1 {
		t.Fatalf("%d verdicts", len(vs))
	}
	v := vs[0]
	if v.Leak.Verdict != leak.VerdictUnknown || v.Leak.BytesPerStep != 0 {
		t.Errorf("leak %s %d B/step: %s", v.Leak.Verdict, v.Leak.BytesPerStep, v.Leak.Reason)
	}
	if v.Frag == nil || v.Frag.Verdict != frag.VerdictUnknown || v.Frag.WastedBytes < 0 {
		t.Errorf("fragmentation %+v", v.Frag)
	}
	if p := v.Peak; p == nil || p.AllocatedBytes != truth.Peak["0"] || !p.RelativeToWindowStart ||
		p.Composition == nil || len(p.Composition.ByCategory) != 0 || len(p.Holders) != 0 {
		t.Errorf("peak %+v, want the running sum's %d with no split by category or line", p, truth.Peak["0"])
	}
}

// The digest's chart of that trace (what a summary keeps): no reserved
// line, since the trace records none, and allocated still downsampled to
// the digest's points with its peak kept.
func TestDigestChartOfTorch18Trace(t *testing.T) {
	in := loadInput(t, memtest.Testdata("public", "kineto_tb_plugin", "worker0.1623143089861.pt.trace.json.gz"))
	d := MakeDigest(in)
	if len(d.Charts) != 1 {
		t.Fatalf("%d charts", len(d.Charts))
	}
	c := d.Charts[0]
	if c.Reserved.Len() != 0 || c.Allocated.Len() == 0 || c.Allocated.Len() > TimelinePoints {
		t.Errorf("reserved %d points, allocated %d (at most %d)", c.Reserved.Len(), c.Allocated.Len(), TimelinePoints)
	}
	if got, want := slices.Max(c.Allocated.V), slices.Max(memtimeline.TraceTimelines(in.Trace)[0].Allocated.V); got != want {
		t.Errorf("the downsampled peak is %d, the trace's %d", got, want)
	}
}

// A trace without GPU memory events is said to be so for the reason the
// trace shows: a legacy export (torch 1.13 built without Kineto) drops
// them whatever profile_memory was; a Kineto trace without the flag was
// recorded without it.
func TestNoMemoryCause(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{memtest.Testdata("cpu_torch113", "cpu_train", "trace.json.gz"), "legacy profiler export"},
		{memtest.Testdata("public", "hta", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"), "without profile_memory=True"},
	} {
		if got := noMemoryCause(loadInput(t, c.path)); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.path, got, c.want)
		}
	}
}
