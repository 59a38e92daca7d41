package frag

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
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
	mem := gpuEvents(t, opts.Device)
	if len(mem) == 0 {
		rep.Verdict = VerdictUnknown
		rep.Reason = "the trace has no GPU memory events: profile with profile_memory=True"
		if opts.Device >= 0 {
			rep.Reason = fmt.Sprintf("the trace has no memory events on GPU %d (profile with profile_memory=True, or pick another --device)", opts.Device)
		}
		rep.Reasons = append(rep.Reasons, rep.Reason)
		return rep
	}
	if rep.Device < 0 {
		rep.Device = busiestDevice(t, mem)
	}
	clock := newStepClock(t.Steps)
	rep.WholeWindow = clock.whole()
	for k, s := range clock.steps {
		rep.Steps = append(rep.Steps, Step{Name: clock.name(k), Number: s.Number, Steady: k > 0, StartNS: s.Start, DurNS: s.Dur})
	}

	attr := d.Attribution()
	rep.countTraffic(t, mem, clock, memtimeline.NewSiteIndex(attr, memtimeline.SiteOptions{Device: opts.Device, Depth: opts.Depth}), opts)
	calls := runtimeCalls(t)
	refills := rep.followReserved(t, attr, mem, calls, clock)
	rep.countSegmentCalls(t, attr, mem, calls, refills, clock, opts)

	rep.judge(opts, steadyCount(rep.Steps))
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

// gpuEvents are the GPU memory events of the selected device(s) (-1 all),
// in time order, as Memory indices.
func gpuEvents(t *chrometrace.Trace, device int) []int32 {
	keep := func(e *chrometrace.MemoryEvent) bool {
		return e.DeviceType.IsGPU() && e.Bytes != 0 && (device < 0 || int(e.DeviceID) == device)
	}
	// Counted first: one list of their number, not append's outgrown
	// ones (five times as much on a large trace).
	n := 0
	for i := range t.Memory {
		if keep(&t.Memory[i]) {
			n++
		}
	}
	mem := make([]int32, 0, n)
	for i := range t.Memory {
		if keep(&t.Memory[i]) {
			mem = append(mem, int32(i))
		}
	}
	slices.SortStableFunc(mem, func(a, b int32) int { return cmp.Compare(t.Memory[a].TS, t.Memory[b].TS) })
	return mem
}

// stepClock places times in the trace's ProfilerSteps, in start order.
type stepClock struct {
	steps []chrometrace.Step
	of    func(int64) int // -1: before the first step
}

func newStepClock(steps []chrometrace.Step) stepClock {
	steps = slices.Clone(steps)
	slices.SortFunc(steps, func(a, b chrometrace.Step) int { return cmp.Compare(a.Start, b.Start) })
	return stepClock{steps: steps, of: chrometrace.NewStepCursor(steps).Of}
}

// whole: no ProfilerStep annotations, the window is one step.
func (c stepClock) whole() bool { return len(c.steps) == 0 }

// name is step k's name in the report.
func (c stepClock) name(k int) string {
	if k < 0 {
		if c.whole() {
			return "whole window"
		}
		return "before first step"
	}
	return fmt.Sprintf("ProfilerStep#%d", c.steps[k].Number)
}

// countTraffic counts allocations and frees per step, the size
// histogram, and the small allocations with their sites.
func (rep *Report) countTraffic(t *chrometrace.Trace, mem []int32, clock stepClock, siteIndex *memtimeline.SiteIndex, opts Options) {
	smallSites := newSiteCounter()
	var smallInSteps int64
	for _, i := range mem {
		e := &t.Memory[i]
		k := clock.of(e.TS)
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
	nSteps := max(1, len(clock.steps))
	sa := &rep.SmallAllocs
	sa.Fraction = fmtutil.Ratio(sa.Count, rep.Allocs)
	if rep.WholeWindow {
		sa.PerStep = float64(sa.Count)
	} else {
		sa.PerStep = float64(smallInSteps) / float64(nSteps)
	}
	sa.TopSites = smallSites.top(opts.TopSites, sa.Count, nSteps)
}

// refills marks what the allocator did around an out-of-memory: the
// runtime calls of its retry (by calls index), and the segments that grew
// the cache back to where it was before the retry's flush (by event time,
// and counted per step).
type refills struct {
	oomRetry map[int]bool
	isRefill map[int64]bool
	perStep  []int64
}

// reservedWalk follows reserved minus allocated over time on one GPU,
// segment grows and drops, per pool (pool.go).
type reservedWalk struct {
	rep        *Report
	clock      stepClock
	pools      *poolSim
	poolMisses [2]PoolUse
	oomTS      []int64
	refillTo   int64 // reserved before an OOM retry's flush, while growing back
	refills    refills
}

// followReserved walks the analysed GPU's events: the gap at the peak and
// at its largest, per-step peaks, reserved drops and segment grows, and
// the pools' misses.
func (rep *Report) followReserved(t *chrometrace.Trace, attr *chrometrace.Attribution, mem []int32, calls []runtimeCall, clock stepClock) refills {
	w := &reservedWalk{
		rep: rep, clock: clock, pools: newPoolSim(), oomTS: oomTimes(t, rep.Device), refillTo: -1,
		refills: refills{oomRetry: oomRetryCalls(t, calls, mem, rep.Device), isRefill: map[int64]bool{}, perStep: make([]int64, len(rep.Steps))},
	}
	nextCall := 0
	var prev *chrometrace.MemoryEvent
	for _, i := range mem {
		e := &t.Memory[i]
		if int(e.DeviceID) != rep.Device {
			continue
		}
		// cudaFree calls since the previous event of this GPU explain a drop.
		var freesBefore int64
		var emptyCache bool
		for nextCall < len(calls) && calls[nextCall].ts <= e.TS {
			c := calls[nextCall]
			if !c.malloc {
				freesBefore++
				emptyCache = emptyCache || underEmptyCache(attr.PyStackAt(t.HostOps[c.op].Thread, c.ts))
			}
			nextCall++
		}
		w.event(t, e, prev, freesBefore, emptyCache)
		prev = e
	}
	rep.Pools = w.pools.use()
	for p := range rep.Pools {
		rep.Pools[p].Misses, rep.Pools[p].MissBytes = w.poolMisses[p].Misses, w.poolMisses[p].MissBytes
	}
	return w.refills
}

// event follows one memory event e of the analysed GPU (prev: the one
// before, nil for the first), with the cudaFree calls made since prev.
func (w *reservedWalk) event(t *chrometrace.Trace, e, prev *chrometrace.MemoryEvent, freesBefore int64, emptyCache bool) {
	rep := w.rep
	k := w.clock.of(e.TS)
	gap := e.TotalReserved - e.TotalAllocated
	point := func() *GapPoint {
		return &GapPoint{TS: e.TS, Step: w.clock.name(k), Allocated: e.TotalAllocated, Reserved: e.TotalReserved, Gap: gap, Fraction: fmtutil.Ratio(gap, e.TotalReserved)}
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
		retry := oomBetween(w.oomTS, prev.TS, e.TS)
		if retry {
			w.refillTo = max(w.refillTo, prev.TotalReserved)
		}
		rep.ReservedDrops = append(rep.ReservedDrops, ReservedDrop{TS: e.TS, Step: w.clock.name(k), Bytes: dropped, ReservedAfter: e.TotalReserved,
			CudaFreeCalls: freesBefore, EmptyCache: emptyCache, OOMRetry: retry})
		released := dropped
		if e.Bytes > 0 && !w.pools.inUsedSegment(e.Addr) {
			// Reserved fell at an allocation: a cudaMalloc failed, the
			// allocator gave its unused segments back and made a new one
			// for this block. The drop is net of that segment.
			retrySegment = segmentSize(e.Bytes)
			released += retrySegment
			rep.AllocRetries++
			rep.ReservedDrops[len(rep.ReservedDrops)-1].AllocRetry = true
			w.countMiss(e, k, retrySegment) // against the cache before it was given back
		}
		w.pools.release(released)
	}
	grown := int64(0)
	if prev != nil && e.TotalReserved > prev.TotalReserved {
		grown = e.TotalReserved - prev.TotalReserved
		if k >= 0 {
			rep.Steps[k].SegmentGrows++
			rep.Steps[k].ReservedGrownBytes += grown
		}
		if w.refillTo >= 0 && e.TotalReserved <= w.refillTo {
			w.refills.isRefill[e.TS] = true
			if k >= 0 {
				w.refills.perStep[k]++
			}
		} else {
			w.refillTo = -1
		}
	}
	if e.Bytes > 0 {
		if retrySegment > 0 {
			w.pools.grow(e.Addr, e.Bytes, retrySegment)
		}
		if grown > 0 {
			w.countMiss(e, k, grown)
			w.pools.grow(e.Addr, e.Bytes, grown)
		}
		w.pools.alloc(e.Addr, e.Bytes)
	} else {
		w.pools.free(e.Addr, -e.Bytes)
	}
}

// countMiss counts a new segment of grown bytes for allocation e as a
// miss when its pool already held the requested bytes idle.
func (w *reservedWalk) countMiss(e *chrometrace.MemoryEvent, k int, grown int64) {
	idle := w.pools.idleFor(e.Bytes)
	if idle < e.Bytes {
		return
	}
	rep := w.rep
	p := poolOf(e.Bytes)
	rep.FragmentedMisses++
	rep.FragmentedMissBytes += grown
	w.poolMisses[p].Misses++
	w.poolMisses[p].MissBytes += grown
	if len(rep.Misses) < 20 {
		rep.Misses = append(rep.Misses, FragmentedMiss{TS: e.TS, Step: w.clock.name(k), Pool: poolNames[p], RequestBytes: e.Bytes, GrownBytes: grown, PoolIdleBytes: idle})
	}
}

// countSegmentCalls counts cudaMalloc / cudaFree per step, and which
// steady-state calls are churn (with their sites); without runtime events
// in the trace, from the reserved memory's grows and drops.
func (rep *Report) countSegmentCalls(t *chrometrace.Trace, attr *chrometrace.Attribution, mem []int32, calls []runtimeCall, rf refills, clock stepClock, opts Options) {
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
		if rf.oomRetry[ci] {
			rep.OOMRetryCalls++
		} else if c.malloc && rf.isRefill[nextMemTS(t, mem, rep.Device, c.ts)] {
			rep.RefillMallocs++
		}
		k := clock.of(c.ts)
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
		if rf.oomRetry[ci] || (c.malloc && rf.isRefill[nextMemTS(t, mem, rep.Device, c.ts)]) {
			continue // the allocator's OOM retry, and growing back after it
		}
		if !c.malloc || !st.NewPeak {
			st.ChurnCalls++
			callSites.add(churnSite(t, attr, c, stack, opts.Depth), 0)
		}
	}
	if sc.Source == "reserved" {
		rep.callsFromReserved(rf.perStep)
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
}

// churnSite is the code site of a churning runtime call c made under the
// Python stack, its innermost depth user frames (0: all).
func churnSite(t *chrometrace.Trace, attr *chrometrace.Attribution, c runtimeCall, stack []string, depth int) memtimeline.Site {
	for j, f := range stack {
		stack[j] = chrometrace.NormalizeFrame(f)
	}
	chain := attr.HostOpChain(int(c.op))
	if !c.malloc && underEmptyCache(stack) {
		// Python code, not an operator, made these calls: name it.
		chain = append(chain, emptyCacheOp)
	}
	site := memtimeline.Site{Frames: memtimeline.UserFrames(stack), Operator: strings.Join(append(chain, t.Str(t.HostOps[c.op].Name)), " > ")}
	if depth > 0 && len(site.Frames) > depth {
		site.Frames = site.Frames[len(site.Frames)-depth:]
	}
	return site
}

// callsFromReserved counts segment calls without runtime events in the
// trace: a reserved rise is one new segment, a drop at least one cudaFree;
// refillGrows are each step's rises growing the cache back after an OOM
// retry.
func (rep *Report) callsFromReserved(refillGrows []int64) {
	sc := &rep.SegmentCalls
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

func stepIndex(steps []Step, name string) int {
	for k := range steps {
		if steps[k].Name == name {
			return k
		}
	}
	return -1
}
