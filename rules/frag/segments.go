package frag

import (
	"cmp"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
)

// ReservedDrop is reserved memory falling: segments given back to the
// driver, by empty_cache() or by an allocation retry after a failed cudaMalloc.
type ReservedDrop struct {
	TS            int64  `json:"ts_ns"`
	Step          string `json:"step"`
	Bytes         int64  `json:"bytes"`
	ReservedAfter int64  `json:"reserved_after_bytes"`
	// CudaFreeCalls are the cudaFree calls since the previous memory event;
	// EmptyCache is true when they ran under torch.cuda.empty_cache(),
	// OOMRetry when the allocator freed its cache to retry a request that
	// then failed with out-of-memory.
	CudaFreeCalls int64 `json:"cuda_free_calls"`
	EmptyCache    bool  `json:"empty_cache"`
	OOMRetry      bool  `json:"oom_retry"`
	// AllocRetry: reserved fell at an allocation that made a new segment,
	// a cudaMalloc that failed, freed the cache and was retried.
	AllocRetry bool `json:"alloc_retry,omitempty"`
}

// Cause says why reserved memory fell: what gave the cached segments
// back. Every view of a drop (frag's table, annotate's markers) says it
// in these words.
func (d ReservedDrop) Cause() string {
	switch {
	case d.OOMRetry:
		return "cache freed to retry a request that then failed (OOM)"
	case d.AllocRetry:
		return "cudaMalloc retry: a cudaMalloc failed, the allocator freed its cache and retried"
	case d.EmptyCache:
		return "torch.cuda.empty_cache()"
	}
	return "cached segments given back"
}

// SegmentCalls sums the caching allocator's calls into the CUDA runtime.
type SegmentCalls struct {
	// Source is "cuda_runtime" when the trace has CUDA runtime events, else
	// "reserved": counts inferred from rises (cudaMalloc) and drops
	// (cudaFree bursts) of reserved memory.
	Source       string `json:"source"`
	CudaMalloc   int64  `json:"cuda_malloc_calls"`
	CudaMallocNS int64  `json:"cuda_malloc_ns"`
	CudaFree     int64  `json:"cuda_free_calls"`
	CudaFreeNS   int64  `json:"cuda_free_ns"`
	// Steady* count the calls in steps after the first.
	SteadyCudaMalloc int64 `json:"steady_cuda_malloc_calls"`
	SteadyCudaFree   int64 `json:"steady_cuda_free_calls"`
	// ChurnCalls: steady cudaFree plus steady cudaMalloc not explained by a
	// new peak; ChurnPerStep divides by the steady steps.
	ChurnCalls   int64   `json:"churn_calls"`
	ChurnPerStep float64 `json:"churn_per_step"`
	// EmptyCacheFrees are cudaFree calls made inside torch.cuda.empty_cache().
	EmptyCacheFrees int64 `json:"empty_cache_frees"`
	// TopSites are where the steady-state calls were made ("cudaFree" or
	// "cudaMalloc" in Operator's last place).
	TopSites []CodeSite `json:"top_sites"`
}

// emptyCacheOp stands in the operator chain of cudaFree calls that
// torch.cuda.empty_cache() made (Python code, not an operator).
const emptyCacheOp = "torch.cuda.empty_cache"

// Cause is the call site to point at for churn: an empty_cache() call when
// there is one (it causes the cudaMalloc that follow), else the busiest.
func (sc *SegmentCalls) Cause() (CodeSite, bool) {
	for _, s := range sc.TopSites {
		if strings.Contains(s.Operator, emptyCacheOp) {
			return s, true
		}
	}
	if len(sc.TopSites) > 0 {
		return sc.TopSites[0], true
	}
	return CodeSite{}, false
}

// runtimeCall is one cudaMalloc or cudaFree host event.
type runtimeCall struct {
	op      int32 // HostOps index
	ts, dur int64
	malloc  bool
}

// runtimeCalls returns the trace's cudaMalloc/cudaFree calls in time order.
// Only the runtime API names are counted: pinned host memory
// (cudaMallocHost, cudaHostAlloc) is not the device cache.
func runtimeCalls(t *chrometrace.Trace) []runtimeCall {
	var mallocID, freeID chrometrace.StrID
	found := 0
	for id, s := range t.Strings {
		switch s {
		case "cudaMalloc":
			mallocID = chrometrace.StrID(id)
			found++
		case "cudaFree":
			freeID = chrometrace.StrID(id)
			found++
		}
	}
	if found == 0 {
		return nil
	}
	var out []runtimeCall
	for i := range t.HostOps {
		o := &t.HostOps[i]
		if o.Cat != chrometrace.CatCUDARuntime || (o.Name != mallocID && o.Name != freeID) || o.Name == chrometrace.NoStr {
			continue
		}
		out = append(out, runtimeCall{op: int32(i), ts: o.Start, dur: o.Dur, malloc: o.Name == mallocID})
	}
	slices.SortStableFunc(out, func(a, b runtimeCall) int { return cmp.Compare(a.ts, b.ts) })
	return out
}

func hasRuntimeEvents(t *chrometrace.Trace) bool {
	for i := range t.HostOps {
		if t.HostOps[i].Cat == chrometrace.CatCUDARuntime {
			return true
		}
	}
	return false
}

// underEmptyCache reports whether a Python stack runs inside
// torch.cuda.empty_cache() (torch/cuda/memory.py: empty_cache, or the C
// binding _cuda_emptyCache).
func underEmptyCache(stack []string) bool {
	for _, f := range stack {
		if strings.Contains(f, "_cuda_emptyCache") {
			return true
		}
		if fr, ok := chrometrace.ParseFrame(f); ok && fr.Name == "empty_cache" && strings.HasSuffix(fr.Filename, "cuda/memory.py") {
			return true
		}
	}
	return false
}

func hasEmptyCacheDrop(drops []ReservedDrop) bool {
	for _, d := range drops {
		if d.EmptyCache {
			return true
		}
	}
	return false
}

// oomTimes are the out-of-memory events of a GPU, in time order.
func oomTimes(t *chrometrace.Trace, device int) []int64 {
	var out []int64
	for _, o := range t.OOMs {
		if o.DeviceType.IsGPU() && (device < 0 || int(o.DeviceID) == device) {
			out = append(out, o.TS)
		}
	}
	slices.Sort(out)
	return out
}

func oomBetween(ooms []int64, from, to int64) bool {
	k, _ := slices.BinarySearch(ooms, from)
	return k < len(ooms) && ooms[k] <= to
}

// oomRetryCalls marks the runtime calls of the allocator's retry before
// each out-of-memory error: every cudaMalloc (failing) and cudaFree (its
// cache flushed) after the device's last memory event before the error.
func oomRetryCalls(t *chrometrace.Trace, calls []runtimeCall, mem []int32, device int) map[int]bool {
	out := map[int]bool{}
	for _, ts := range oomTimes(t, device) {
		last := int64(-1 << 62)
		for _, i := range mem {
			e := &t.Memory[i]
			if int(e.DeviceID) == device && e.TS < ts {
				last = max(last, e.TS)
			}
		}
		for ci, c := range calls {
			if c.ts > last && c.ts <= ts {
				out[ci] = true
			}
		}
	}
	return out
}

// nextMemTS is the time of the device's first memory event at or after ts
// (the allocation a cudaMalloc call was made for), -1 when none.
func nextMemTS(t *chrometrace.Trace, mem []int32, device int, ts int64) int64 {
	k, _ := slices.BinarySearchFunc(mem, ts, func(i int32, ts int64) int { return cmp.Compare(t.Memory[i].TS, ts) })
	for ; k < len(mem); k++ {
		if e := &t.Memory[mem[k]]; int(e.DeviceID) == device {
			return e.TS
		}
	}
	return -1
}
