package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// Shared analyses, computed once per input.

// Leaks is the input's leak report with default options.
func (in *Input) Leaks() LeakReport {
	return Memo(in, "leaks", func() LeakReport { return AnalyzeLeaks(in.Trace, DefaultLeakOptions()) })
}

// Operators is the input's per-operator table (all GPUs).
func (in *Input) Operators() []chrometrace.OperatorStats {
	return Memo(in, "operators", func() []chrometrace.OperatorStats {
		return chrometrace.Operators(in.Trace, chrometrace.OperatorOptions{Device: -1})
	})
}

// LocationOf returns the innermost user frame of a stack as file:line.
func LocationOf(stack []string) *Location {
	for i := len(stack) - 1; i >= 0; i-- {
		if chrometrace.IsLibraryFrame(stack[i]) {
			continue
		}
		if f, ok := chrometrace.ParseFrame(stack[i]); ok {
			return &Location{File: f.File, Line: f.Line, Function: f.Function}
		}
	}
	return nil
}

func init() {
	Register(&Rule{
		ID:          "memory.leak",
		Description: "GPU memory grows step over step: the same site keeps memory from each of 3 or more consecutive steps (a leak at any size; under the threshold in bytes per step it is a warning)",
		Severity:    Error,
		Threshold:   1 << 20,
		Unit:        "bytes_per_step",
		Check: func(r *Rule, in *Input) []Finding {
			if in.Trace == nil {
				return nil
			}
			return leakFindings(in.Leaks(), r.Threshold)
		},
	})
	Register(&Rule{
		ID:          "memory.oom",
		Description: "The run hit CUDA out-of-memory ([OutOfMemory] events in the trace)",
		Severity:    Error,
		Threshold:   1,
		Unit:        "events",
		Check: func(r *Rule, in *Input) []Finding {
			if in.Trace == nil || float64(len(in.Trace.OOMs)) < r.Threshold {
				return nil
			}
			o := in.Trace.OOMs[0]
			return []Finding{{
				Title: fmt.Sprintf("Out of memory: a request for %s failed on %s:%d", memtimeline.FormatBytes(o.Bytes), o.DeviceType, o.DeviceID),
				Detail: fmt.Sprintf("%d out-of-memory events; at the first, %s was allocated and %s reserved.",
					len(in.Trace.OOMs), memtimeline.FormatBytes(o.TotalAllocated), memtimeline.FormatBytes(o.TotalReserved)),
				Advice:  "Lower the batch size or sequence length, use activation checkpointing or mixed precision, and check for leaks (torchmem leaks). If reserved is far above allocated, try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
				Metrics: map[string]float64{"oom_events": float64(len(in.Trace.OOMs)), "request_bytes": float64(o.Bytes), "allocated_bytes": float64(o.TotalAllocated), "reserved_bytes": float64(o.TotalReserved)},
			}}
		},
	})
	Register(&Rule{
		ID:          "memory.op-self-limit",
		Description: "One operator's Self CUDA Mem (what it keeps allocated beyond its children) exceeds the limit",
		Severity:    Warning,
		Threshold:   1 << 30,
		Unit:        "bytes",
		Check: func(r *Rule, in *Input) []Finding {
			if in.Trace == nil {
				return nil
			}
			var out []Finding
			for _, op := range in.Operators() {
				if op.OnDevice || strings.HasPrefix(op.Name, "ProfilerStep") || float64(op.SelfDeviceMemory) <= r.Threshold {
					continue
				}
				out = append(out, Finding{
					Title:    fmt.Sprintf("%s: Self CUDA Mem %s over %d calls", op.Name, memtimeline.FormatBytes(op.SelfDeviceMemory), op.Calls),
					Detail:   fmt.Sprintf("%s keeps %s allocated across its %d calls (limit %s); %d allocations, %s mean.", op.Name, memtimeline.FormatBytes(op.SelfDeviceMemory), op.Calls, memtimeline.FormatBytes(int64(r.Threshold)), op.Allocs, memtimeline.FormatBytes(safeDiv(op.AllocBytes, op.Allocs))),
					Advice:   "See which lines call it (torchmem stacks --sort alloc); large activations shrink with smaller batches, checkpointing or lower precision.",
					Operator: op.Name,
					Metrics:  map[string]float64{"self_device_memory_bytes": float64(op.SelfDeviceMemory), "calls": float64(op.Calls)},
				})
			}
			slices.SortFunc(out, func(a, b Finding) int {
				return cmp.Compare(b.Metrics["self_device_memory_bytes"], a.Metrics["self_device_memory_bytes"])
			})
			return out
		},
	})
	Register(&Rule{
		ID:          "memory.top-ops-share",
		Description: "The top 5 operators make most of the allocated bytes: where to look first",
		Severity:    Info,
		Threshold:   0.8,
		Unit:        "fraction",
		Check: func(r *Rule, in *Input) []Finding {
			if in.Trace == nil {
				return nil
			}
			ops := slices.DeleteFunc(slices.Clone(in.Operators()), func(o chrometrace.OperatorStats) bool {
				return o.Name == "ProfilerStep*" // a window, not an operator
			})
			var total int64
			for _, o := range ops {
				total += o.AllocBytes
			}
			if total == 0 {
				return nil
			}
			slices.SortFunc(ops, func(a, b chrometrace.OperatorStats) int { return cmp.Compare(b.AllocBytes, a.AllocBytes) })
			var top int64
			var names []string
			for _, o := range ops[:min(5, len(ops))] {
				top += o.AllocBytes
				names = append(names, o.Name)
			}
			share := float64(top) / float64(total)
			if share <= r.Threshold {
				return nil
			}
			return []Finding{{
				Title:    fmt.Sprintf("5 operators make %.0f%% of allocated bytes", 100*share),
				Detail:   fmt.Sprintf("%s allocate %s of %s.", strings.Join(names, ", "), memtimeline.FormatBytes(top), memtimeline.FormatBytes(total)),
				Advice:   "Start with these operators' call sites: torchmem stacks --sort alloc.",
				Operator: names[0],
				Metrics:  map[string]float64{"fraction": share, "top_bytes": float64(top), "total_bytes": float64(total)},
			}}
		},
	})
	Register(&Rule{
		ID:          "memory.peak-reserved",
		Description: "Peak reserved memory is close to the GPU's total memory: little headroom before OOM",
		Severity:    Warning,
		Threshold:   0.9,
		Unit:        "fraction",
		Check: func(r *Rule, in *Input) []Finding {
			if in.Trace == nil {
				return nil
			}
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
					Advice:  "A larger batch or model will OOM. Reduce activation memory (checkpointing, mixed precision) or the cache's overhead (expandable_segments:True).",
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

// siteName is the innermost user frame of a stack, or the first operator.
func siteName(stack []string, op string) string {
	if l := LocationOf(stack); l != nil {
		return fmt.Sprintf("%s:%d (%s)", l.File, l.Line, l.Function)
	}
	if len(stack) > 0 {
		return stack[len(stack)-1]
	}
	return firstOp(op)
}
