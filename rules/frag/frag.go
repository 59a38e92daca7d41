package frag

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

// Fragmentation verdicts.
const (
	VerdictFragmented = "fragmented"
	VerdictOK         = "ok"
	VerdictUnknown    = "unknown"
)

// Signal ids: the rule ids `torchmem check` reports them under.
const (
	SmallAllocFlood = "memory.small-alloc-flood"
	ReservedGap     = "memory.reserved-gap"
	CudaMallocChurn = "memory.cudamalloc-churn"
)

// AllocConfExpandable is the allocator setting most fixes name: segments
// that grow in place instead of new ones beside them. Every advice that
// names it uses this constant, so it is written once.
const AllocConfExpandable = "PYTORCH_CUDA_ALLOC_CONF=" + ExpandableSegments

// ExpandableSegments is that setting as the advice names it inline.
const ExpandableSegments = "expandable_segments:True"

// AdviceLowerPeak is what to do when the allocator had to flush its cache
// to serve a request (a cudaMalloc retry): memory is nearly full.
const AdviceLowerPeak = "lower the peak or use " + ExpandableSegments

// AdviceSplitFree is what to try when free memory is split inside used
// segments (a snapshot's inactive split, memory_summary's non-releasable).
const AdviceSplitFree = "Try " + AllocConfExpandable + ", or max_split_size_mb to stop large blocks being split; pre-allocate buffers of fixed sizes."

// AdviceSnapshotShowsSplit says where to look next when a memory_summary()
// log shows split free memory but not where it is.
const AdviceSnapshotShowsSplit = "An allocator snapshot (torchmem snapshot) shows which segments hold the split blocks."

// What to try for each fragmentation signal.
const (
	AdviceReuseBuffers       = "Pre-allocate and reuse buffers (allocate once outside the loop, fill with .copy_() or out=) instead of creating thousands of tiny tensors every step."
	AdviceBatchSmall         = "Batch small tensors into one: torch.stack/torch.cat them, or keep one flat buffer and take views; move per-step Python scalars to the GPU once, not as a new tensor each time."
	AdviceExpandableSegments = "Set " + AllocConfExpandable + ": segments grow in place, so freed memory is reusable for requests of any size."
	AdviceMaxSplitSize       = "Or set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N> (e.g. 128) so large cached blocks are not split for smaller requests; allocate long-lived large tensors first."
	AdviceNoEmptyCache       = "Remove torch.cuda.empty_cache() from the loop: every call gives segments back that the next step takes again with cudaMalloc, which synchronizes the device."
	AdviceAllocRetry         = "cudaFree without empty_cache() means a cudaMalloc failed and the allocator freed its cache to retry (num_alloc_retries in torch.cuda.memory_stats()): memory is nearly full; " + AdviceLowerPeak + "."
	AdviceSteadyMalloc       = "New segments after the first step without a new peak mean cached blocks did not fit the requests: try " + ExpandableSegments + ", and keep tensor shapes stable from step to step."
)

// Options tune the fragmentation detector. Each signal has its own
// threshold; any one signal crossing it makes the verdict "fragmented".
type Options struct {
	Device int // GPU index, -1 all (the reserved timeline follows one GPU: see Analyze)
	// SmallMaxBytes is the largest block counted as a small allocation.
	SmallMaxBytes int64
	// MinSmallPerStep and MinSmallFraction: a flood is at least this many
	// small blocks per step AND at least this fraction of all allocations.
	// Both are needed: a big model makes hundreds of small bias and norm
	// buffers per step as a minority of its allocations, which is normal.
	MinSmallPerStep  float64
	MinSmallFraction float64
	// MinGapFraction and MinGapBytes: reserved minus allocated at the
	// moment allocated memory peaks, as a fraction of reserved and in bytes.
	// The gap counts only when the allocator also asked the driver for a
	// new segment while it held at least the requested bytes idle: memory
	// it had but could not use. An idle cache left over from an earlier,
	// higher peak (warm-up, cudnn benchmarking) is not fragmentation.
	MinGapFraction float64
	MinGapBytes    int64
	// MinChurnPerStep is the number of cudaMalloc and cudaFree calls per
	// steady-state step (every step after the first) at which the cache is
	// said to keep missing. cudaMalloc calls made while the step's peak
	// allocated memory climbs to a new high are growth, not churn, and are
	// left out (see torchmem leaks for growth).
	MinChurnPerStep float64
	// Depth of the Python stacks that key sites (innermost frames).
	Depth int
	// TopSites caps the small-allocation and runtime-call sites kept (0: all).
	TopSites int
}

// DefaultOptions: 1000 blocks of <= 4 KiB per step making half of all
// allocations; a gap of 30% and 64 MiB of reserved at peak with a segment
// allocated while that much sat idle; one cudaMalloc/cudaFree per steady step.
func DefaultOptions() Options {
	return Options{
		Device: -1, SmallMaxBytes: 4096,
		MinSmallPerStep: 1000, MinSmallFraction: 0.5,
		MinGapFraction: 0.3, MinGapBytes: 64 << 20,
		MinChurnPerStep: 1,
		Depth:           5, TopSites: 10,
	}
}

// SizeBucket is one bar of the allocation size histogram: blocks of
// (MinBytes, MaxBytes] bytes, MaxBytes 0 meaning no upper bound.
type SizeBucket struct {
	Label    string  `json:"label"`
	MinBytes int64   `json:"min_bytes"`
	MaxBytes int64   `json:"max_bytes"`
	Pool     string  `json:"pool"` // the caching allocator pool these blocks come from
	Count    int64   `json:"count"`
	Bytes    int64   `json:"bytes"`
	Fraction float64 `json:"fraction"` // of all allocations, by count
}

// fragBuckets follow the caching allocator's own size classes: 512 B is its
// rounding unit, <= 1 MiB the small pool (2 MiB segments), < 10 MiB large
// blocks carved from 20 MiB segments, larger ones get their own segment.
var fragBuckets = []SizeBucket{
	{Label: "<= 512 B", MaxBytes: 512, Pool: "small"},
	{Label: "<= 4 KiB", MinBytes: 512, MaxBytes: 4 << 10, Pool: "small"},
	{Label: "<= 64 KiB", MinBytes: 4 << 10, MaxBytes: 64 << 10, Pool: "small"},
	{Label: "<= 1 MiB", MinBytes: 64 << 10, MaxBytes: 1 << 20, Pool: "small"},
	{Label: "<= 10 MiB", MinBytes: 1 << 20, MaxBytes: 10 << 20, Pool: "large (20 MiB segments)"},
	{Label: "> 10 MiB", MinBytes: 10 << 20, Pool: "large (own segment)"},
}

// CodeSite is a place in the code (Python stack and operator chain) with
// how many times it did something.
type CodeSite struct {
	Count     int64          `json:"count"`
	Bytes     int64          `json:"bytes"`
	PerStep   float64        `json:"per_step"`
	Fraction  float64        `json:"fraction"` // of the counted events
	Operator  string         `json:"operator"`
	ForwardOp string         `json:"forward_operator,omitempty"`
	Stack     []string       `json:"stack"`
	Location  *site.Location `json:"location,omitempty"`
}

// SmallAllocs counts blocks of at most MaxBytes.
type SmallAllocs struct {
	MaxBytes int64 `json:"max_bytes"`
	Count    int64 `json:"count"`
	Bytes    int64 `json:"bytes"`
	// PerStep is the mean over profiled steps (the whole count without steps).
	PerStep  float64 `json:"per_step"`
	Fraction float64 `json:"fraction"` // of all GPU allocations, by count
	// TopSites are the code sites making most of them, by count.
	TopSites []CodeSite `json:"top_sites"`
}

// Step is one ProfilerStep#N: allocator traffic and segment calls.
type Step struct {
	Name   string `json:"name"`
	Number int64  `json:"number"`
	// Steady is true for every step after the first: by then the cache
	// should serve the loop without new segments.
	Steady bool `json:"steady_state"`
	// StartNS and DurNS place the step on the trace's clock (ns).
	StartNS     int64 `json:"start_ns"`
	DurNS       int64 `json:"dur_ns"`
	Allocs      int64 `json:"allocs"`
	Frees       int64 `json:"frees"`
	AllocBytes  int64 `json:"alloc_bytes"`
	FreedBytes  int64 `json:"freed_bytes"`
	SmallAllocs int64 `json:"small_allocs"`
	// PeakAllocated and PeakReserved are the step's highest totals.
	PeakAllocated int64 `json:"peak_allocated_bytes"`
	PeakReserved  int64 `json:"peak_reserved_bytes"`
	CudaMalloc    int64 `json:"cuda_malloc_calls"`
	CudaMallocNS  int64 `json:"cuda_malloc_ns"`
	CudaFree      int64 `json:"cuda_free_calls"`
	CudaFreeNS    int64 `json:"cuda_free_ns"`
	// SegmentGrows and ReservedGrownBytes: events where reserved rose (a
	// new segment); ReservedReturnedBytes: reserved dropped (segments freed).
	SegmentGrows          int64 `json:"segment_grows"`
	ReservedGrownBytes    int64 `json:"reserved_grown_bytes"`
	ReservedReturnedBytes int64 `json:"reserved_returned_bytes"`
	// NewPeak is true when the step's peak allocated exceeds every earlier
	// step's: new segments are then growth, not cache misses.
	NewPeak bool `json:"new_peak"`
	// ChurnCalls are the steady-state calls that count as churn: cudaFree,
	// and cudaMalloc unless NewPeak.
	ChurnCalls int64 `json:"churn_calls"`
}

// GapPoint is reserved minus allocated at one moment.
type GapPoint struct {
	TS        int64   `json:"ts_ns"`
	Step      string  `json:"step"`
	Allocated int64   `json:"allocated_bytes"`
	Reserved  int64   `json:"reserved_bytes"`
	Gap       int64   `json:"gap_bytes"`
	Fraction  float64 `json:"fraction"` // of reserved
}

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

// Signal is one detector of the verdict with its number and limit.
type Signal struct {
	ID        string  `json:"id"`
	Fired     bool    `json:"fired"`
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Unit      string  `json:"unit"`
	Detail    string  `json:"detail"`
}

// Report is the answer to "is the caching allocator fragmented, and why?".
type Report struct {
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason"`
	Reasons []string `json:"reasons"`
	Advice  []string `json:"advice"`
	// Device is the GPU whose reserved/allocated timeline was followed.
	Device      int          `json:"device"`
	Allocs      int64        `json:"allocs"`
	AllocBytes  int64        `json:"alloc_bytes"`
	Frees       int64        `json:"frees"`
	FreedBytes  int64        `json:"freed_bytes"`
	SmallAllocs SmallAllocs  `json:"small_allocs"`
	Histogram   []SizeBucket `json:"histogram"`
	Steps       []Step       `json:"steps"`
	WholeWindow bool         `json:"whole_window"`
	GapAtPeak   *GapPoint    `json:"gap_at_peak"`
	LargestGap  *GapPoint    `json:"largest_gap"`
	// FragmentedMisses counts segments allocated while the cache held at
	// least the requested bytes idle: memory it had but not in one piece
	// (or in the other pool); FragmentedMissBytes is the reserved they added.
	FragmentedMisses    int64 `json:"fragmented_misses"`
	FragmentedMissBytes int64 `json:"fragmented_miss_bytes"`
	// AllocRetries counts the allocator's free-and-retry seen in the
	// window: a cudaMalloc failed, every unused segment went back to the
	// driver and the allocation made a new one (reserved fell at it).
	AllocRetries int64 `json:"alloc_retries,omitempty"`
	// Misses lists them (first 20); Pools is each pool at the window's end.
	Misses []FragmentedMiss `json:"misses"`
	Pools  []PoolUse        `json:"pools"`
	// OOMRetryCalls are cudaMalloc/cudaFree calls of the allocator's retry
	// before an out-of-memory error (it frees its cache and tries again),
	// and RefillMallocs the cudaMalloc calls that grew reserved back to
	// where it was before that flush: neither is churn.
	OOMRetryCalls int64          `json:"oom_retry_calls"`
	RefillMallocs int64          `json:"refill_mallocs"`
	SegmentCalls  SegmentCalls   `json:"segment_calls"`
	ReservedDrops []ReservedDrop `json:"reserved_drops"`
	Signals       []Signal       `json:"signals"`
}

// Signal returns the named signal (zero value when absent).
func (r *Report) Signal(id string) Signal {
	for _, s := range r.Signals {
		if s.ID == id {
			return s
		}
	}
	return Signal{ID: id}
}

// Data is what the fragmentation analysis of a trace reads: the trace and
// its attribution, given as an accessor (rules.Input's cached one) called
// only when the trace has GPU memory events on the analysed device.
type Data struct {
	Trace       *chrometrace.Trace
	Attribution func() *chrometrace.Attribution
}

// TraceData reads a trace on its own, for a caller without a shared
// rules.Input.
func TraceData(t *chrometrace.Trace) Data {
	return Data{Trace: t, Attribution: func() *chrometrace.Attribution { return chrometrace.Attribute(t) }}
}

// Analyze looks for the trace-visible signs of a fragmented or
// thrashing caching allocator: floods of tiny blocks, reserved memory far
// above allocated at the peak while new segments are still requested, and
// cudaMalloc/cudaFree after the first step (the cache keeps missing, or
// empty_cache() gives segments back that the next step takes again).
//
// What a trace cannot tell: where blocks lie inside segments (inactive
// split blocks, the largest free block): that needs an allocator snapshot.
func Analyze(d Data, opts Options) Report {
	t := d.Trace
	rep := Report{
		Device: opts.Device, Steps: []Step{}, Histogram: slices.Clone(fragBuckets),
		SmallAllocs:   SmallAllocs{MaxBytes: opts.SmallMaxBytes, TopSites: []CodeSite{}},
		ReservedDrops: []ReservedDrop{}, Reasons: []string{}, Advice: []string{}, Signals: []Signal{},
		Misses: []FragmentedMiss{}, Pools: []PoolUse{},
		SegmentCalls: SegmentCalls{TopSites: []CodeSite{}},
	}
	// GPU memory events of the selected device(s), in time order.
	var mem []int32
	for i := range t.Memory {
		e := &t.Memory[i]
		if e.DeviceType.IsGPU() && e.Bytes != 0 && (opts.Device < 0 || int(e.DeviceID) == opts.Device) {
			mem = append(mem, int32(i))
		}
	}
	if len(mem) == 0 {
		rep.Verdict = VerdictUnknown
		rep.Reason = "the trace has no GPU memory events: profile with profile_memory=True"
		if opts.Device >= 0 {
			rep.Reason = fmt.Sprintf("the trace has no memory events on GPU %d (profile with profile_memory=True, or pick another --device)", opts.Device)
		}
		rep.Reasons = append(rep.Reasons, rep.Reason)
		return rep
	}
	slices.SortStableFunc(mem, func(a, b int32) int { return cmp.Compare(t.Memory[a].TS, t.Memory[b].TS) })
	if rep.Device < 0 {
		rep.Device = busiestDevice(t, mem)
	}

	steps := slices.Clone(t.Steps)
	slices.SortFunc(steps, func(a, b chrometrace.Step) int { return cmp.Compare(a.Start, b.Start) })
	rep.WholeWindow = len(steps) == 0
	stepOf := chrometrace.NewStepCursor(steps).Of // -1: before the first step
	stepName := func(k int) string {
		if k < 0 {
			if rep.WholeWindow {
				return "whole window"
			}
			return "before first step"
		}
		return fmt.Sprintf("ProfilerStep#%d", steps[k].Number)
	}
	for k, s := range steps {
		rep.Steps = append(rep.Steps, Step{Name: stepName(k), Number: s.Number, Steady: k > 0, StartNS: s.Start, DurNS: s.Dur})
	}
	nSteps := max(1, len(steps))

	// Traffic, histogram, small allocations and their sites.
	attr := d.Attribution()
	siteOpts := memtimeline.SiteOptions{Device: opts.Device, Depth: opts.Depth}
	smallSites := newSiteCounter()
	siteIndex := memtimeline.NewSiteIndex(attr, siteOpts)
	var smallInSteps int64
	for _, i := range mem {
		e := &t.Memory[i]
		k := stepOf(e.TS)
		var st *Step
		if k >= 0 {
			st = &rep.Steps[k]
		}
		if e.Bytes < 0 {
			rep.Frees++
			rep.FreedBytes -= e.Bytes
			if st != nil {
				st.Frees++
				st.FreedBytes -= e.Bytes
			}
			continue
		}
		rep.Allocs++
		rep.AllocBytes += e.Bytes
		for b := range rep.Histogram {
			h := &rep.Histogram[b]
			if e.Bytes > h.MinBytes && (h.MaxBytes == 0 || e.Bytes <= h.MaxBytes) {
				h.Count++
				h.Bytes += e.Bytes
				break
			}
		}
		if st != nil {
			st.Allocs++
			st.AllocBytes += e.Bytes
		}
		if e.Bytes <= opts.SmallMaxBytes {
			rep.SmallAllocs.Count++
			rep.SmallAllocs.Bytes += e.Bytes
			if st != nil {
				st.SmallAllocs++
				smallInSteps++
			}
			smallSites.addEvent(siteIndex, int(i), e.Bytes)
		}
	}
	for b := range rep.Histogram {
		rep.Histogram[b].Fraction = fmtutil.Ratio(rep.Histogram[b].Count, rep.Allocs)
	}
	sa := &rep.SmallAllocs
	sa.Fraction = fmtutil.Ratio(sa.Count, rep.Allocs)
	if rep.WholeWindow {
		sa.PerStep = float64(sa.Count)
	} else {
		sa.PerStep = float64(smallInSteps) / float64(nSteps)
	}
	sa.TopSites = smallSites.top(opts.TopSites, sa.Count, nSteps)

	// Reserved minus allocated over time on one GPU, segment grows and
	// drops, followed per pool (pool.go).
	type pending struct{ frees int64 }
	calls := runtimeCalls(t)
	oomRetry := oomRetryCalls(t, calls, mem, rep.Device)
	oomTS := oomTimes(t, rep.Device)
	nextCall := 0
	var prev *chrometrace.MemoryEvent
	pools := newPoolSim()
	poolMisses := [2]PoolUse{}
	refillTo := int64(-1) // reserved before an OOM retry's flush, while growing back
	isRefill := map[int64]bool{}
	// countMiss counts a new segment of grown bytes for allocation e as a
	// miss when its pool already held the requested bytes idle.
	countMiss := func(e *chrometrace.MemoryEvent, k int, grown int64) {
		idle := pools.idleFor(e.Bytes)
		if idle < e.Bytes {
			return
		}
		p := poolOf(e.Bytes)
		rep.FragmentedMisses++
		rep.FragmentedMissBytes += grown
		poolMisses[p].Misses++
		poolMisses[p].MissBytes += grown
		if len(rep.Misses) < 20 {
			rep.Misses = append(rep.Misses, FragmentedMiss{TS: e.TS, Step: stepName(k), Pool: poolNames[p], RequestBytes: e.Bytes, GrownBytes: grown, PoolIdleBytes: idle})
		}
	}
	refillGrows := make([]int64, len(rep.Steps))
	for _, i := range mem {
		e := &t.Memory[i]
		if int(e.DeviceID) != rep.Device {
			continue
		}
		k := stepOf(e.TS)
		// cudaFree calls since the previous event of this GPU explain a drop.
		var freesBefore pending
		var emptyCache bool
		for nextCall < len(calls) && calls[nextCall].ts <= e.TS {
			c := calls[nextCall]
			if !c.malloc {
				freesBefore.frees++
				emptyCache = emptyCache || underEmptyCache(attr.PyStackAt(t.HostOps[c.op].Thread, c.ts))
			}
			nextCall++
		}
		gap := e.TotalReserved - e.TotalAllocated
		point := func() *GapPoint {
			return &GapPoint{TS: e.TS, Step: stepName(k), Allocated: e.TotalAllocated, Reserved: e.TotalReserved, Gap: gap, Fraction: fmtutil.Ratio(gap, e.TotalReserved)}
		}
		// Without Total Reserved (torch < 1.10) there is no gap to measure.
		if !t.MemorySchema.NoReserved && (rep.GapAtPeak == nil || e.TotalAllocated > rep.GapAtPeak.Allocated) {
			rep.GapAtPeak = point()
		}
		if !t.MemorySchema.NoReserved && (rep.LargestGap == nil || gap > rep.LargestGap.Gap) {
			rep.LargestGap = point()
		}
		if k >= 0 {
			st := &rep.Steps[k]
			st.PeakAllocated = max(st.PeakAllocated, e.TotalAllocated)
			st.PeakReserved = max(st.PeakReserved, e.TotalReserved)
		}
		retrySegment := int64(0) // a segment made right after the cache was given back
		if prev != nil && e.TotalReserved < prev.TotalReserved {
			dropped := prev.TotalReserved - e.TotalReserved
			if k >= 0 {
				rep.Steps[k].ReservedReturnedBytes += dropped
			}
			retry := oomBetween(oomTS, prev.TS, e.TS)
			if retry {
				refillTo = max(refillTo, prev.TotalReserved)
			}
			rep.ReservedDrops = append(rep.ReservedDrops, ReservedDrop{TS: e.TS, Step: stepName(k), Bytes: dropped, ReservedAfter: e.TotalReserved,
				CudaFreeCalls: freesBefore.frees, EmptyCache: emptyCache, OOMRetry: retry})
			released := dropped
			if e.Bytes > 0 && !pools.inUsedSegment(e.Addr) {
				// Reserved fell at an allocation: a cudaMalloc failed, the
				// allocator gave its unused segments back and made a new one
				// for this block. The drop is net of that segment.
				retrySegment = segmentSize(e.Bytes)
				released += retrySegment
				rep.AllocRetries++
				rep.ReservedDrops[len(rep.ReservedDrops)-1].AllocRetry = true
				countMiss(e, k, retrySegment) // against the cache before it was given back
			}
			pools.release(released)
		}
		grown := int64(0)
		if prev != nil && e.TotalReserved > prev.TotalReserved {
			grown = e.TotalReserved - prev.TotalReserved
			if k >= 0 {
				rep.Steps[k].SegmentGrows++
				rep.Steps[k].ReservedGrownBytes += grown
			}
			if refillTo >= 0 && e.TotalReserved <= refillTo {
				isRefill[e.TS] = true
				if k >= 0 {
					refillGrows[k]++
				}
			} else {
				refillTo = -1
			}
		}
		if e.Bytes > 0 {
			if retrySegment > 0 {
				pools.grow(e.Addr, e.Bytes, retrySegment)
			}
			if grown > 0 {
				countMiss(e, k, grown)
				pools.grow(e.Addr, e.Bytes, grown)
			}
			pools.alloc(e.Addr, e.Bytes)
		} else {
			pools.free(e.Addr, -e.Bytes)
		}
		prev = e
	}
	rep.Pools = pools.use()
	for p := range rep.Pools {
		rep.Pools[p].Misses, rep.Pools[p].MissBytes = poolMisses[p].Misses, poolMisses[p].MissBytes
	}

	// cudaMalloc / cudaFree per step, and which steady-state calls are churn.
	sc := &rep.SegmentCalls
	sc.Source = "cuda_runtime"
	if !hasRuntimeEvents(t) {
		sc.Source = "reserved"
	}
	peakSoFar := int64(-1)
	for k := range rep.Steps {
		st := &rep.Steps[k]
		st.NewPeak = st.PeakAllocated > peakSoFar
		peakSoFar = max(peakSoFar, st.PeakAllocated)
	}
	callSites := newSiteCounter()
	for ci, c := range calls {
		if oomRetry[ci] {
			rep.OOMRetryCalls++
		} else if c.malloc && isRefill[nextMemTS(t, mem, rep.Device, c.ts)] {
			rep.RefillMallocs++
		}
		k := stepOf(c.ts)
		if c.malloc {
			sc.CudaMalloc++
			sc.CudaMallocNS += c.dur
		} else {
			sc.CudaFree++
			sc.CudaFreeNS += c.dur
		}
		stack := attr.PyStackAt(t.HostOps[c.op].Thread, c.ts)
		if !c.malloc && underEmptyCache(stack) {
			sc.EmptyCacheFrees++
		}
		if k < 0 {
			continue
		}
		st := &rep.Steps[k]
		if c.malloc {
			st.CudaMalloc++
			st.CudaMallocNS += c.dur
		} else {
			st.CudaFree++
			st.CudaFreeNS += c.dur
		}
		if !st.Steady {
			continue
		}
		if c.malloc {
			sc.SteadyCudaMalloc++
		} else {
			sc.SteadyCudaFree++
		}
		if oomRetry[ci] || (c.malloc && isRefill[nextMemTS(t, mem, rep.Device, c.ts)]) {
			continue // the allocator's OOM retry, and growing back after it
		}
		if !c.malloc || !st.NewPeak {
			st.ChurnCalls++
			for j, f := range stack {
				stack[j] = chrometrace.NormalizeFrame(f)
			}
			chain := attr.HostOpChain(int(c.op))
			if !c.malloc && underEmptyCache(stack) {
				// Python code, not an operator, made these calls: name it.
				chain = append(chain, emptyCacheOp)
			}
			site := memtimeline.Site{Frames: memtimeline.UserFrames(stack), Operator: strings.Join(append(chain, t.Str(t.HostOps[c.op].Name)), " > ")}
			if opts.Depth > 0 && len(site.Frames) > opts.Depth {
				site.Frames = site.Frames[len(site.Frames)-opts.Depth:]
			}
			callSites.add(site, 0)
		}
	}
	if sc.Source == "reserved" {
		// No runtime events: a reserved rise is one new segment, a drop at
		// least one cudaFree.
		for k := range rep.Steps {
			st := &rep.Steps[k]
			st.CudaMalloc = st.SegmentGrows
			st.CudaFree = 0
		}
		retryDrops := make([]int64, len(rep.Steps))
		for _, d := range rep.ReservedDrops {
			if k := stepIndex(rep.Steps, d.Step); k >= 0 {
				rep.Steps[k].CudaFree++
				if d.OOMRetry {
					retryDrops[k]++
					rep.OOMRetryCalls++
				}
			}
		}
		for k := range rep.Steps {
			st := &rep.Steps[k]
			sc.CudaMalloc += st.CudaMalloc
			sc.CudaFree += st.CudaFree
			rep.RefillMallocs += refillGrows[k]
			if st.Steady {
				sc.SteadyCudaMalloc += st.CudaMalloc
				sc.SteadyCudaFree += st.CudaFree
				st.ChurnCalls = st.CudaFree - retryDrops[k]
				if !st.NewPeak {
					st.ChurnCalls += st.CudaMalloc - refillGrows[k]
				}
			}
		}
	}
	steadySteps := 0
	for _, st := range rep.Steps {
		if st.Steady {
			steadySteps++
			sc.ChurnCalls += st.ChurnCalls
		}
	}
	if steadySteps > 0 {
		sc.ChurnPerStep = float64(sc.ChurnCalls) / float64(steadySteps)
	}
	sc.TopSites = callSites.top(opts.TopSites, sc.ChurnCalls, max(1, steadySteps))

	rep.judge(opts, steadySteps)
	if t.MemorySchema.NoReserved {
		// torch < 1.10: no Total Reserved, so no segment, gap or pool
		// figure; only the allocation sizes were judged.
		note := "reserved memory is not recorded in this trace (torch before 1.10): the reserved-allocated gap, new segments and pool misses are not measured, only allocation sizes"
		rep.Reasons = append(rep.Reasons, note)
		if rep.Verdict == VerdictOK {
			rep.Verdict = VerdictUnknown
			rep.Reason = note + "; " + strings.Join(rep.Reasons[:len(rep.Reasons)-1], "; ")
		} else {
			rep.Reason += "; " + note
		}
	}
	return rep
}

// judge evaluates the three signals and writes verdict, reasons and advice.
func (rep *Report) judge(opts Options, steadySteps int) {
	sa := rep.SmallAllocs
	perStep := "per step"
	if rep.WholeWindow {
		perStep = "in the window (no ProfilerStep annotations)"
	}
	flood := Signal{
		ID: SmallAllocFlood, Value: sa.PerStep, Threshold: opts.MinSmallPerStep, Unit: "allocs_per_step",
		Fired: sa.PerStep >= opts.MinSmallPerStep && sa.Fraction >= opts.MinSmallFraction,
		Detail: fmt.Sprintf("%.0f allocations of <= %s %s, %.1f%% of all %d GPU allocations (flood: >= %.0f and >= %.0f%%)",
			sa.PerStep, memtimeline.FormatBytes(sa.MaxBytes), perStep, 100*sa.Fraction, rep.Allocs, opts.MinSmallPerStep, 100*opts.MinSmallFraction),
	}
	if flood.Fired && len(sa.TopSites) > 0 {
		top := sa.TopSites[0]
		flood.Detail += fmt.Sprintf("; top site %s via %s makes %.0f%% of them", site.Name(top.Stack, top.Operator), site.FirstOp(top.Operator), 100*top.Fraction)
	}

	gap := Signal{ID: ReservedGap, Threshold: opts.MinGapFraction, Unit: "fraction"}
	if p, l := rep.GapAtPeak, rep.LargestGap; p != nil && l != nil {
		// Wasted: segments added while their pool held the bytes idle (at
		// least MinGapBytes of them), with reserved running far above
		// allocated (the largest gap of the window, MinGapFraction).
		gap.Value = l.Fraction
		gap.Fired = l.Fraction >= opts.MinGapFraction && rep.FragmentedMissBytes >= opts.MinGapBytes
		gap.Detail = fmt.Sprintf("at peak allocated (%s, %s) reserved was %s: %s (%.1f%%) idle in the cache; at most %s (%.1f%%, %s)",
			memtimeline.FormatBytes(p.Allocated), p.Step, memtimeline.FormatBytes(p.Reserved), memtimeline.FormatBytes(p.Gap), 100*p.Fraction,
			memtimeline.FormatBytes(l.Gap), 100*l.Fraction, l.Step)
		switch {
		case rep.FragmentedMisses > 0:
			gap.Detail += fmt.Sprintf("; %d new segment(s) (%s) were allocated while the same pool held at least the requested bytes idle, not in one piece",
				rep.FragmentedMisses, memtimeline.FormatBytes(rep.FragmentedMissBytes))
			if len(rep.Misses) > 0 {
				m := rep.Misses[0]
				gap.Detail += fmt.Sprintf(" (first: %s in the %s pool asked for while it held %s idle)", memtimeline.FormatBytes(m.RequestBytes), m.Pool, memtimeline.FormatBytes(m.PoolIdleBytes))
			}
		case l.Fraction >= opts.MinGapFraction:
			gap.Detail += "; but no segment was added while the request's pool held enough idle bytes: the idle memory was reserved earlier (warm-up, cudnn benchmarking, an earlier higher peak) or sits in the other pool, and is not shown to be fragmented"
		}
		gap.Detail += fmt.Sprintf(" (limit: %.0f%% idle and %s of such segments)", 100*opts.MinGapFraction, memtimeline.FormatBytes(opts.MinGapBytes))
	}

	sc := rep.SegmentCalls
	churn := Signal{ID: CudaMallocChurn, Value: sc.ChurnPerStep, Threshold: opts.MinChurnPerStep, Unit: "calls_per_step"}
	callName := "cudaMalloc/cudaFree"
	if sc.Source == "reserved" {
		callName = "segment allocations/releases (from reserved memory; no CUDA runtime events in the trace)"
	}
	switch {
	case steadySteps == 0:
		churn.Detail = fmt.Sprintf("no steady state to judge: %d profiled %s; %d cudaMalloc and %d cudaFree in the window", len(rep.Steps), fmtutil.Plural(float64(len(rep.Steps)), "step", "steps"), sc.CudaMalloc, sc.CudaFree)
	default:
		churn.Fired = sc.ChurnPerStep >= opts.MinChurnPerStep
		churn.Detail = fmt.Sprintf("%d %s in %d steady-state %s after the first: %.1f per step (limit %.1f); %d cudaMalloc, %d cudaFree",
			sc.ChurnCalls, callName, steadySteps, fmtutil.Plural(float64(steadySteps), "step", "steps"), sc.ChurnPerStep, opts.MinChurnPerStep, sc.SteadyCudaMalloc, sc.SteadyCudaFree)
		if grow := sc.SteadyCudaMalloc + sc.SteadyCudaFree - sc.ChurnCalls; grow > 0 {
			churn.Detail += fmt.Sprintf("; %d cudaMalloc in steps reaching a new peak are growth, not churn (see torchmem leaks)", grow)
		}
		if sc.EmptyCacheFrees > 0 {
			churn.Detail += fmt.Sprintf("; %d cudaFree ran inside torch.cuda.empty_cache()", sc.EmptyCacheFrees)
		}
		if rep.OOMRetryCalls+rep.RefillMallocs > 0 {
			churn.Detail += fmt.Sprintf("; %d calls of the allocator's retry before out-of-memory and %d cudaMalloc growing the cache back after it are not churn", rep.OOMRetryCalls, rep.RefillMallocs)
		}
		if cause, ok := sc.Cause(); churn.Fired && ok {
			if strings.Contains(cause.Operator, emptyCacheOp) {
				churn.Detail += fmt.Sprintf("; empty_cache() called from %s", site.Name(cause.Stack, cause.Operator))
			} else {
				churn.Detail += fmt.Sprintf("; most from %s", site.Name(cause.Stack, cause.Operator))
			}
		}
	}
	rep.Signals = []Signal{flood, gap, churn}

	for _, s := range rep.Signals {
		if s.Fired {
			rep.Reasons = append(rep.Reasons, s.Detail)
		}
	}
	if flood.Fired {
		rep.Advice = append(rep.Advice, AdviceReuseBuffers, AdviceBatchSmall)
	}
	if gap.Fired {
		rep.Advice = append(rep.Advice, AdviceExpandableSegments, AdviceMaxSplitSize)
	}
	if churn.Fired {
		rep.Advice = append(rep.Advice, rep.ChurnAdvice()...)
	}
	// Fragmented means the cache wastes memory: blocks too small to share
	// (a flood of tiny tensors) or idle bytes that could not serve the
	// requests of their pool. Churn alone costs time, not memory: it is its
	// own finding (memory.cudamalloc-churn), not this verdict.
	if flood.Fired || gap.Fired {
		rep.Verdict = VerdictFragmented
		rep.Reason = "the cache wastes memory: " + rep.wasteSentence(flood.Fired, gap.Fired) + "; " + strings.Join(rep.Reasons, "; ")
		return
	}
	rep.Verdict = VerdictOK
	var parts []string
	for _, s := range rep.Signals {
		if s.Detail != "" {
			parts = append(parts, s.Detail)
		}
	}
	rep.Reason = "no fragmentation signal: " + strings.Join(parts, "; ")
	if churn.Fired {
		rep.Reason = "no memory wasted, but the cache keeps calling the driver (memory.cudamalloc-churn): " + strings.Join(parts, "; ")
	}
	rep.Reasons = parts
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

// churnAdvice says what to try against steady-state segment calls,
// depending on where they came from.
func (rep *Report) ChurnAdvice() []string {
	sc := rep.SegmentCalls
	var out []string
	if sc.EmptyCacheFrees > 0 || hasEmptyCacheDrop(rep.ReservedDrops) {
		out = append(out, AdviceNoEmptyCache)
	}
	if sc.SteadyCudaFree > sc.EmptyCacheFrees && !hasEmptyCacheDrop(rep.ReservedDrops) {
		out = append(out, AdviceAllocRetry)
	}
	if sc.SteadyCudaMalloc > 0 && sc.EmptyCacheFrees == 0 && !hasEmptyCacheDrop(rep.ReservedDrops) {
		out = append(out, AdviceSteadyMalloc)
	}
	if len(out) == 0 {
		out = append(out, AdviceSteadyMalloc)
	}
	return out
}

// busiestDevice is the GPU with the highest allocated total: the one whose
// reserved/allocated timeline matters.
func busiestDevice(t *chrometrace.Trace, mem []int32) int {
	dev, peak := -1, int64(-1)
	for _, i := range mem {
		e := &t.Memory[i]
		if e.TotalAllocated > peak {
			dev, peak = int(e.DeviceID), e.TotalAllocated
		}
	}
	return dev
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

func stepIndex(steps []Step, name string) int {
	for k := range steps {
		if steps[k].Name == name {
			return k
		}
	}
	return -1
}

// siteCounter counts events per code site.
type siteCounter struct {
	sites map[string]*CodeSite
	// byIndex caches the sites of a SiteIndex's numbers (addEvent).
	byIndex []*CodeSite
}

func newSiteCounter() *siteCounter { return &siteCounter{sites: map[string]*CodeSite{}} }

func (c *siteCounter) add(s memtimeline.Site, bytes int64) {
	agg := c.site(s)
	agg.Count++
	agg.Bytes += bytes
}

// addEvent counts memory event i at its site in x, naming each site once.
func (c *siteCounter) addEvent(x *memtimeline.SiteIndex, i int, bytes int64) {
	k := x.Of(i)
	if int(k) >= len(c.byIndex) {
		c.byIndex = append(c.byIndex, make([]*CodeSite, int(k)+1-len(c.byIndex))...)
	}
	agg := c.byIndex[k]
	if agg == nil {
		agg = c.site(x.Site(k))
		c.byIndex[k] = agg
	}
	agg.Count++
	agg.Bytes += bytes
}

func (c *siteCounter) site(s memtimeline.Site) *CodeSite {
	key := strings.Join(s.Frames, "\x00") + "\x01" + s.Operator + "\x01" + s.ForwardOp
	agg := c.sites[key]
	if agg == nil {
		agg = &CodeSite{Operator: s.Operator, ForwardOp: s.ForwardOp, Stack: fmtutil.NonNil(s.Frames), Location: site.LocationOf(s.Frames)}
		c.sites[key] = agg
	}
	return agg
}

// top returns the n sites with the most events (0: all), with per-step
// rates and shares of total.
func (c *siteCounter) top(n int, total int64, steps int) []CodeSite {
	out := make([]CodeSite, 0, len(c.sites))
	for _, s := range c.sites {
		s.PerStep = float64(s.Count) / float64(steps)
		s.Fraction = fmtutil.Ratio(s.Count, total)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b CodeSite) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Operator, b.Operator), slices.Compare(a.Stack, b.Stack))
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

func steadyCount(steps []Step) int {
	n := 0
	for _, s := range steps {
		if s.Steady {
			n++
		}
	}
	return n
}

// Rejudge evaluates the report's signals again under opts' thresholds:
// the measurements do not depend on them, only the verdict, reasons and
// advice do.
func (rep *Report) Rejudge(opts Options) {
	rep.Signals, rep.Reasons, rep.Advice = nil, []string{}, []string{}
	rep.judge(opts, steadyCount(rep.Steps))
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

// wasteSentence says in bytes what the cache wastes.
func (rep *Report) wasteSentence(flood, gap bool) string {
	var parts []string
	if gap {
		s := fmt.Sprintf("%d new segment(s), %s of reserved memory, were added while their pool already held at least the requested bytes idle", rep.FragmentedMisses, memtimeline.FormatBytes(rep.FragmentedMissBytes))
		if l := rep.LargestGap; l != nil {
			s += fmt.Sprintf("; reserved ran %s (%.0f%%) above allocated (%s)", memtimeline.FormatBytes(l.Gap), 100*l.Fraction, l.Step)
		}
		parts = append(parts, s)
	}
	if flood {
		sa := rep.SmallAllocs
		perStep := float64(sa.Bytes) / float64(max(sa.Count, 1)) * sa.PerStep
		parts = append(parts, fmt.Sprintf("%.0f blocks of <= %s per step (%s per step) are each rounded to 512 B and packed into 2 MiB small-pool segments, which they keep split",
			sa.PerStep, memtimeline.FormatBytes(sa.MaxBytes), memtimeline.FormatBytes(int64(perStep))))
	}
	return strings.Join(parts, "; ")
}
