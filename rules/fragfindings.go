package rules

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/site"
)

// Frag is the input's fragmentation report with default options.
func (in *Input) Frag() frag.Report {
	return in.fragWith(frag.DefaultOptions())
}

// fragFinding turns one signal of the report into a finding when the
// rule's own threshold (which configuration may override) is crossed.
func fragFinding(r *Rule, in *Input, check func(rep *frag.Report, opts frag.Options) (Finding, bool)) []Finding {
	opts := frag.DefaultOptions()
	switch r.ID {
	case frag.SmallAllocFlood:
		opts.MinSmallPerStep = r.Threshold
	case frag.ReservedGap:
		opts.MinGapFraction = r.Threshold
	case frag.CudaMallocChurn:
		opts.MinChurnPerStep = r.Threshold
	}
	// The analysis itself does not depend on thresholds, only the verdict.
	rep := in.Frag()
	if rep.Verdict == frag.VerdictUnknown {
		return nil
	}
	rep.Rejudge(opts)
	f, ok := check(&rep, opts)
	if !ok {
		return nil
	}
	return []Finding{f}
}

func init() {
	register(&Rule{
		ID:          frag.SmallAllocFlood,
		Description: "4 KB fragmentation flood: thousands of blocks of <= 4 KiB per step, most of all allocations",
		Severity:    Warning,
		Threshold:   frag.DefaultOptions().MinSmallPerStep,
		Unit:        "allocs_per_step",
		Reads:       []SourceKind{SourceTrace},
		Check: func(r *Rule, in *Input) []Finding {
			return fragFinding(r, in, func(rep *frag.Report, opts frag.Options) (Finding, bool) {
				sig := rep.Signal(frag.SmallAllocFlood)
				if !sig.Fired {
					return Finding{}, false
				}
				sa := rep.SmallAllocs
				f := Finding{
					Title:  fmt.Sprintf("%.0f allocations of <= %s per step (%.0f%% of all)", sa.PerStep, memtimeline.FormatBytes(sa.MaxBytes), 100*sa.Fraction),
					Detail: sig.Detail + ".",
					Advice: frag.AdviceReuseBuffers + " " + frag.AdviceBatchSmall,
					Metrics: map[string]float64{"allocs_per_step": sa.PerStep, "fraction": sa.Fraction, "count": float64(sa.Count),
						"bytes": float64(sa.Bytes)},
				}
				if len(sa.TopSites) > 0 {
					top := sa.TopSites[0]
					f.Operator = site.FirstOp(top.Operator)
					f.Location = top.Location
					f.Metrics["top_site_count"] = float64(top.Count)
				}
				return f, true
			})
		},
	})
	register(&Rule{
		ID:          frag.ReservedGap,
		Description: "The cache wastes memory: new segments while their pool (small <= 1 MiB, large) held at least the requested bytes idle, with reserved far above allocated",
		Severity:    Warning,
		Threshold:   frag.DefaultOptions().MinGapFraction,
		Unit:        "fraction",
		Reads:       []SourceKind{SourceTrace},
		Check: func(r *Rule, in *Input) []Finding {
			return fragFinding(r, in, func(rep *frag.Report, opts frag.Options) (Finding, bool) {
				sig := rep.Signal(frag.ReservedGap)
				if !sig.Fired {
					return Finding{}, false
				}
				l := rep.LargestGap
				return Finding{
					Title: fmt.Sprintf("The cache wastes memory on GPU %d: %s of new segments while their pool held the bytes idle, reserved up to %s (%.0f%%) above allocated",
						rep.Device, memtimeline.FormatBytes(rep.FragmentedMissBytes), memtimeline.FormatBytes(l.Gap), 100*l.Fraction),
					Detail: sig.Detail + ".",
					Advice: frag.AdviceExpandableSegments + " " + frag.AdviceMaxSplitSize,
					Metrics: map[string]float64{"fraction": l.Fraction, "gap_bytes": float64(l.Gap), "reserved_bytes": float64(l.Reserved),
						"allocated_bytes": float64(l.Allocated), "fragmented_misses": float64(rep.FragmentedMisses), "fragmented_miss_bytes": float64(rep.FragmentedMissBytes)},
				}, true
			})
		},
	})
	register(&Rule{
		ID:          frag.CudaMallocChurn,
		Description: "cudaMalloc/cudaFree in steady state: the cache keeps missing or empty_cache() runs in the loop",
		Severity:    Warning,
		Threshold:   frag.DefaultOptions().MinChurnPerStep,
		Unit:        "calls_per_step",
		Reads:       []SourceKind{SourceTrace},
		Check: func(r *Rule, in *Input) []Finding {
			return fragFinding(r, in, func(rep *frag.Report, opts frag.Options) (Finding, bool) {
				sig := rep.Signal(frag.CudaMallocChurn)
				if !sig.Fired {
					return Finding{}, false
				}
				sc := rep.SegmentCalls
				f := Finding{
					Title:  fmt.Sprintf("%.1f cudaMalloc/cudaFree calls per step after the first step", sc.ChurnPerStep),
					Detail: sig.Detail + ".",
					Advice: strings.Join(rep.ChurnAdvice(), " "),
					Metrics: map[string]float64{"calls_per_step": sc.ChurnPerStep, "cuda_malloc_calls": float64(sc.SteadyCudaMalloc),
						"cuda_free_calls": float64(sc.SteadyCudaFree), "empty_cache_frees": float64(sc.EmptyCacheFrees),
						"cuda_malloc_ns": float64(sc.CudaMallocNS), "cuda_free_ns": float64(sc.CudaFreeNS)},
				}
				if cause, ok := sc.Cause(); ok {
					f.Operator = site.FirstOp(cause.Operator)
					f.Location = cause.Location
				}
				return f, true
			})
		},
	})
}
