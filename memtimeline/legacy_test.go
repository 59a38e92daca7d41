package memtimeline_test

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The TensorBoard plugin's memory-curve test (tb_plugin/test/
// test_profiler.py, TestMemoryCurve): CPU and GPU [memory] events
// interleaved; the GPU curve is each GPU event's Total Allocated and Total
// Reserved in time order, the CPU events are no part of it.
func TestTBPluginMemoryCurve(t *testing.T) {
	tr := memtest.Trace(t, memtest.Testdata("public", "kineto_tb_plugin", "memory_curve.json.gz"))
	var want struct {
		GPU [][7]int64 `json:"GPU0"`
	}
	memtest.ReadJSON(t, memtest.Testdata("public", "kineto_tb_plugin", "memory_curve.expected.json"), &want)
	tls := memtimeline.TraceTimelines(tr)
	if len(tls) != 1 || tls[0].Label() != "cuda:0" {
		t.Fatalf("%d timelines, want cuda:0 alone", len(tls))
	}
	tl := tls[0]
	if len(tl.Allocated.T) != len(want.GPU) {
		t.Fatalf("%d points, want %d", len(tl.Allocated.T), len(want.GPU))
	}
	var peak int64
	for i, e := range want.GPU {
		if tl.Allocated.T[i] != e[0]*1000 || tl.Allocated.V[i] != e[5] || tl.Reserved.V[i] != e[6] {
			t.Errorf("point %d: %d ns allocated %d reserved %d, want %v", i, tl.Allocated.T[i], tl.Allocated.V[i], tl.Reserved.V[i], e)
		}
		peak = max(peak, e[5])
	}
	if got, _ := memtimeline.PeakAllocated(tr, 0); got != peak {
		t.Errorf("peak %d, want %d", got, peak)
	}
}

// torch 1.8/1.9 [memory] events have no Addr: no block is paired (not one
// lifetime at address 0), while the same schema with Addr pairs them.
func TestLifetimesNeedAddr(t *testing.T) {
	old := memtest.Trace(t, memtest.Testdata("public", "kineto_tb_plugin", "worker0.1623143089861.pt.trace.json.gz"))
	if n := len(memtimeline.Lifetimes(old, -1)); n != 0 || old.MemorySchema.WithoutAddr == 0 {
		t.Errorf("%d lifetimes from %d events without Addr", n, old.MemorySchema.WithoutAddr)
	}
	view := memtest.Trace(t, memtest.Testdata("public", "kineto_tb_plugin", "memory_view.old_names.json.gz"))
	var allocs int
	for _, e := range view.Memory {
		if e.DeviceType.IsGPU() && e.Bytes > 0 {
			allocs++
		}
	}
	lts := memtimeline.Lifetimes(view, -1)
	var made int
	for _, lt := range lts {
		if lt.Alloc >= 0 {
			made++
		}
	}
	if made != allocs || view.MemorySchema.WithoutAddr != 0 {
		t.Errorf("%d lifetimes of %d allocations", made, allocs)
	}
}
