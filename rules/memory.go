package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/internal/more"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// Shared analyses, computed once per input.

// Leaks is the input's leak report with default options.
func (in *Input) Leaks() leak.Report {
	return in.leaksWith(in.leakOptions())
}

// leakOptions are the input's leak options: LeakOptions, else the
// defaults.
func (in *Input) leakOptions() leak.Options {
	if in.leakOpts != nil {
		return *in.leakOpts
	}
	return leak.DefaultOptions()
}

// Operators is the input's per-operator table (all GPUs).
func (in *Input) Operators() []chrometrace.OperatorStats {
	if in.IsDigest() {
		return in.Digest.Operators // the top rows only
	}
	return Memo(in, keyOperators, func() []chrometrace.OperatorStats {
		return chrometrace.Operators(in.Trace, operatorOptions)
	})
}

// The operator table the rules and reports share: all GPUs, by name.
var operatorOptions = chrometrace.OperatorOptions{Device: -1}

const keyOperators = "operators"

func init() {
	register(&Rule{
		ID:          "memory.leak",
		Description: "GPU memory grows step over step: the same site keeps memory from each of 3 or more consecutive steps (a leak at any size; under the threshold in bytes per step it is a warning)",
		Severity:    Error,
		Threshold:   1 << 20,
		Unit:        "bytes_per_step",
		Reads:       []SourceKind{SourceTrace},
		Check: func(r *Rule, in *Input) []Finding {
			return leakFindings(in.Leaks(), r.Threshold, true)
		},
	})
	register(&Rule{
		ID:          "memory.oom",
		Description: "The run hit CUDA out-of-memory ([OutOfMemory] events in the trace)",
		Severity:    Error,
		Threshold:   1,
		Unit:        "events",
		Reads:       []SourceKind{SourceTrace},
		Check: func(r *Rule, in *Input) []Finding {
			if float64(len(in.Trace.OOMs)) < r.Threshold {
				return nil
			}
			o := in.Trace.OOMs[0]
			return []Finding{{
				Title: fmt.Sprintf("Out of memory: a request for %s failed on %s:%d", memtimeline.FormatBytes(o.Bytes), o.DeviceType, o.DeviceID),
				Detail: fmt.Sprintf("%d out-of-memory events; at the first, %s was allocated and %s reserved.",
					len(in.Trace.OOMs), memtimeline.FormatBytes(o.TotalAllocated), memtimeline.FormatBytes(o.TotalReserved)),
				Advice:  "Lower the batch size or sequence length, use activation checkpointing or mixed precision, and check for leaks (torchmem leaks). If reserved is far above allocated, try " + frag.AllocConfExpandable + ".",
				Metrics: map[string]float64{"oom_events": float64(len(in.Trace.OOMs)), "request_bytes": float64(o.Bytes), "allocated_bytes": float64(o.TotalAllocated), "reserved_bytes": float64(o.TotalReserved)},
			}}
		},
	})
	register(&Rule{
		ID: ruleOpSelfLimit,
		Description: "One operator's tensors hold too much: a single allocation over the limit, or tensors alive at the peak " +
			"over the limit and more than half of the peak",
		Severity:  Warning,
		Threshold: 1 << 30,
		Unit:      "bytes",
		Reads:     []SourceKind{SourceTrace},
		Check:     checkOpSelfLimit,
	})
	register(&Rule{
		ID: ruleOpSelfPerStep,
		Description: "torch's rule of thumb: an operator whose Self CUDA Mem per profiled step is over 1 GB deserves a look " +
			"(it allocates that much per step; what it holds is memory.op-self-limit)",
		Severity:  Info,
		Threshold: 1 << 30,
		Unit:      "bytes_per_step",
		Reads:     []SourceKind{SourceTrace},
		Check:     checkOpSelfPerStep,
	})
	register(&Rule{
		ID:          "memory.top-ops-share",
		Description: "The top 5 operators make most of the allocated bytes: where to look first",
		Severity:    Info,
		Threshold:   0.8,
		Unit:        "fraction",
		Reads:       []SourceKind{SourceTrace},
		Check: func(r *Rule, in *Input) []Finding {
			names, top, total := topOpsShare(in)
			if total == 0 {
				return nil
			}
			share := float64(top) / float64(total)
			if share <= r.Threshold {
				return nil
			}
			return []Finding{{
				Title:    fmt.Sprintf("%d operators make %.0f%% of allocated bytes", len(names), 100*share),
				Detail:   fmt.Sprintf("%s allocate %s of %s.", strings.Join(names, ", "), memtimeline.FormatBytes(top), memtimeline.FormatBytes(total)),
				Advice:   "Start with these operators' call sites: torchmem stacks --sort alloc.",
				Operator: names[0],
				Metrics:  map[string]float64{"fraction": share, "top_bytes": float64(top), "total_bytes": float64(total)},
			}}
		},
	})
	register(&Rule{
		ID:          "memory.peak-reserved",
		Description: "Peak reserved memory is close to the GPU's total memory: little headroom before OOM",
		Severity:    Warning,
		Threshold:   0.9,
		Unit:        "fraction",
		Reads:       []SourceKind{SourceTrace},
		Check: func(r *Rule, in *Input) []Finding {
			var out []Finding
			for _, d := range in.Trace.Meta.Devices {
				s := chrometrace.Summarize(in.Trace, int(d.ID))
				if d.TotalGlobalMem <= 0 || s.PeakReservedBytes == 0 {
					continue
				}
				frac := float64(s.PeakReservedBytes) / float64(d.TotalGlobalMem)
				if frac <= r.Threshold {
					continue
				}
				out = append(out, Finding{
					Title:   fmt.Sprintf("GPU %d: peak reserved %s is %.0f%% of its %s", d.ID, memtimeline.FormatBytes(s.PeakReservedBytes), 100*frac, memtimeline.FormatBytes(d.TotalGlobalMem)),
					Detail:  fmt.Sprintf("Peak allocated %s, peak reserved %s on %s.", memtimeline.FormatBytes(s.PeakAllocatedBytes), memtimeline.FormatBytes(s.PeakReservedBytes), d.Name),
					Advice:  "A larger batch or model will OOM. Reduce activation memory (checkpointing, mixed precision) or the cache's overhead (" + frag.ExpandableSegments + ").",
					Metrics: map[string]float64{"fraction": frac, "peak_reserved_bytes": float64(s.PeakReservedBytes), "total_bytes": float64(d.TotalGlobalMem)},
				})
			}
			return out
		},
	})
}

func safeDiv(a, b int64) int64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Operator rule ids.
const (
	ruleOpSelfLimit   = "memory.op-self-limit"
	ruleOpSelfPerStep = "memory.op-self-per-step"
)

// OpHolding is what one operator's allocations hold: the bytes of its
// blocks alive when allocated memory peaks and its largest single block.
// The operator is the innermost one around the allocation (torch's Self).
type OpHolding struct {
	Operator     string `json:"operator"`
	HeldAtPeak   int64  `json:"held_at_peak_bytes"`
	Largest      int64  `json:"largest_alloc_bytes"`
	Allocs       int64  `json:"allocs"`
	LargestStack []string
}

// opHoldings are the input's per-operator holdings (all GPUs), most held
// at the peak first, with the peak they refer to.
func (in *Input) opHoldings() (holdings []OpHolding, peak int64) {
	if in.IsDigest() {
		return in.Digest.OpHoldings, in.Digest.OpHoldingPeak
	}
	type result struct {
		h    []OpHolding
		peak int64
	}
	r := Memo(in, "op-holdings", func() result {
		t := in.Trace
		attr := in.Attribution()
		peak, peakTS := memtimeline.PeakAllocated(t, -1)
		by := map[string]*OpHolding{}
		for _, lt := range in.Lifetimes(-1) {
			if lt.Alloc < 0 {
				continue
			}
			name := "(no operator)"
			if op := attr.Events[lt.Alloc].Op; op >= 0 {
				name = t.Str(t.HostOps[op].Name)
			}
			h := by[name]
			if h == nil {
				h = &OpHolding{Operator: name}
				by[name] = h
			}
			h.Allocs++
			if peakTS >= 0 && lt.Start <= peakTS && (lt.End < 0 || lt.End > peakTS) {
				h.HeldAtPeak += lt.Bytes
			}
			if lt.Bytes > h.Largest {
				h.Largest = lt.Bytes
				h.LargestStack = memtimeline.UserFrames(attr.PyStack(int(lt.Alloc)))
			}
		}
		out := make([]OpHolding, 0, len(by))
		for _, h := range by {
			out = append(out, *h)
		}
		slices.SortFunc(out, func(a, b OpHolding) int {
			return cmp.Or(cmp.Compare(b.HeldAtPeak, a.HeldAtPeak), cmp.Compare(b.Largest, a.Largest), strings.Compare(a.Operator, b.Operator))
		})
		return result{out, peak}
	})
	return r.h, r.peak
}

// checkOpSelfLimit judges what operators hold, not what they churn: a
// single block over the limit, or blocks alive at the peak over the limit
// that make more than half of it (one operator owns the peak).
func checkOpSelfLimit(r *Rule, in *Input) []Finding {
	hs, peak := in.opHoldings()
	limit := int64(r.Threshold)
	var out []Finding
	for _, h := range hs {
		single := h.Largest > limit
		dominant := h.HeldAtPeak > limit && 2*h.HeldAtPeak > peak
		if !single && !dominant {
			continue
		}
		f := Finding{
			Operator: h.Operator,
			Location: site.LocationOf(h.LargestStack).FromTrace(false),
			Advice: "See which lines call it (torchmem stacks --sort peak); large activations shrink with smaller batches or " +
				"sequence lengths, activation checkpointing or lower precision; a single huge buffer can often be chunked.",
			Metrics: map[string]float64{"held_at_peak_bytes": float64(h.HeldAtPeak), "largest_alloc_bytes": float64(h.Largest),
				"peak_allocated_bytes": float64(peak), "share_of_peak": fmtutil.Ratio(h.HeldAtPeak, peak), "allocs": float64(h.Allocs)},
		}
		if dominant {
			f.Title = fmt.Sprintf("%s holds %s at the peak (%.0f%% of %s)", h.Operator, memtimeline.FormatBytes(h.HeldAtPeak), 100*fmtutil.Ratio(h.HeldAtPeak, peak), memtimeline.FormatBytes(peak))
		} else {
			f.Title = fmt.Sprintf("%s allocates a single %s block", h.Operator, memtimeline.FormatBytes(h.Largest))
		}
		f.Detail = fmt.Sprintf("When allocated memory peaked at %s, blocks %s allocated were holding %s (%.0f%% of it); its largest single allocation was %s (limit %s).",
			memtimeline.FormatBytes(peak), h.Operator, memtimeline.FormatBytes(h.HeldAtPeak), 100*fmtutil.Ratio(h.HeldAtPeak, peak), memtimeline.FormatBytes(h.Largest), memtimeline.FormatBytes(limit))
		out = append(out, f)
	}
	return out
}

// checkOpSelfPerStep keeps torch's rule of thumb as a note: Self CUDA Mem
// (bytes allocated minus freed inside the operator, summed over its calls)
// per profiled step over the limit. That is allocation volume, not what
// stays allocated, hence info.
func checkOpSelfPerStep(r *Rule, in *Input) []Finding {
	steps := 0
	seen := map[int64]bool{}
	for _, s := range in.Trace.Steps {
		if !seen[s.Number] {
			seen[s.Number] = true
			steps++
		}
	}
	per := "per profiled step"
	if steps == 0 {
		steps, per = 1, "in the window (no ProfilerStep annotations)"
	}
	type row struct {
		name  string
		self  int64
		calls int64
	}
	var over []row
	for _, op := range in.Operators() {
		if op.OnDevice || op.Annotation || strings.HasPrefix(op.Name, "ProfilerStep") {
			continue
		}
		if float64(op.SelfDeviceMemory)/float64(steps) > r.Threshold {
			over = append(over, row{op.Name, op.SelfDeviceMemory, op.Calls})
		}
	}
	if len(over) == 0 {
		return nil
	}
	slices.SortFunc(over, func(a, b row) int { return cmp.Or(cmp.Compare(b.self, a.self), strings.Compare(a.name, b.name)) })
	var parts []string
	for _, o := range over {
		parts = append(parts, fmt.Sprintf("%s %s (%d calls)", o.name, memtimeline.FormatBytes(o.self/int64(steps)), o.calls/int64(steps)))
	}
	return []Finding{{
		Title: fmt.Sprintf("%d %s over torch's rule of thumb of %s Self CUDA Mem %s", len(over), fmtutil.Plural(float64(len(over)), "operator", "operators"),
			memtimeline.FormatBytes(int64(r.Threshold)), per),
		Detail: fmt.Sprintf("Self CUDA Mem %s: %s. Self CUDA Mem sums what each call allocates minus what it frees itself, so it measures allocation volume "+
			"over %d %s, not memory held; what operators hold at the peak is in memory.op-self-limit and torchmem stacks --sort peak.",
			per, more.Join(parts, 5, ", "), steps, fmtutil.Plural(float64(steps), "step", "steps")),
		Advice:   "Worth a look when memory is tight: fewer or smaller temporaries in these operators (in-place ops, fused kernels, torch.compile) lower the allocator's traffic.",
		Operator: over[0].name,
		Metrics:  map[string]float64{"operators": float64(len(over)), "top_self_bytes_per_step": float64(over[0].self) / float64(steps), "steps": float64(steps)},
	}}
}

// topOpsShare is memory.top-ops-share's metric, the one the checklist
// shows too: the five operators that allocate the most bytes (torch's
// key_averages table, ProfilerStep windows left out) and their bytes
// against all operators'. total is 0 without operators.
func topOpsShare(in *Input) (names []string, top, total int64) {
	if in.IsDigest() {
		if t := in.Digest.TopOps; t != nil {
			return t.Names, t.TopBytes, t.TotalBytes
		}
		return nil, 0, 0
	}
	ops := slices.DeleteFunc(slices.Clone(in.Operators()), func(o chrometrace.OperatorStats) bool {
		return o.Name == "ProfilerStep*" // a window, not an operator
	})
	for _, o := range ops {
		total += o.AllocBytes
	}
	slices.SortFunc(ops, func(a, b chrometrace.OperatorStats) int { return cmp.Compare(b.AllocBytes, a.AllocBytes) })
	for _, o := range ops[:min(5, len(ops))] {
		top += o.AllocBytes
		names = append(names, o.Name)
	}
	return names, top, total
}

// topOps is topOpsShare kept in a digest.
type topOps struct {
	Names      []string `json:"names"`
	TopBytes   int64    `json:"top_bytes"`
	TotalBytes int64    `json:"total_bytes"`
}
