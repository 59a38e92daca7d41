package frag

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

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
