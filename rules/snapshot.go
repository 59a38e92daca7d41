package rules

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/memtimeline"
)

// SnapshotReport is the input's allocator snapshot analysis.
func (in *Input) SnapshotReport() *memtimeline.SnapshotReport {
	return Memo(in, "snapshot", func() *memtimeline.SnapshotReport { return memtimeline.AnalyzeSnapshot(in.Snapshot, 0) })
}

// AnalyzeSnapshotLeaks answers the leak question from an allocator
// snapshot's recorded history: allocations never freed, grouped by the
// user's innermost frame. A group whose survivors were made in most of the
// ProfilerStep windows the history saw is growth; one made in a single
// step (parameters, optimizer state) is not.
func AnalyzeSnapshotLeaks(rep *memtimeline.SnapshotReport, opts LeakOptions) LeakReport {
	out := LeakReport{Steps: []StepSurvivors{}, Suspects: []LeakSuspect{}}
	if rep.TraceEntries == nil || len(rep.TraceEntries) == 0 {
		out.Verdict = VerdictUnknown
		out.Reason = "the snapshot has no recorded history: call torch.cuda.memory._record_memory_history() before the steps you want to see"
		return out
	}
	maxSteps := 0
	for _, c := range rep.Leaks {
		maxSteps = max(maxSteps, c.Steps)
		out.UnreleasedBytes += c.Bytes
		out.UnreleasedBlocks += int64(c.Count)
	}
	if maxSteps == 0 {
		out.Verdict = VerdictUnknown
		out.WholeWindow = true
		out.Reason = fmt.Sprintf("the recorded history has no ProfilerStep annotations, so growth per step cannot be told; %s was never freed", memtimeline.FormatBytes(out.UnreleasedBytes))
	}
	for _, c := range rep.Leaks {
		var stack []string
		// The group's site (the user's innermost frame) may lie beyond the
		// few frames kept for context: put it first, as the outermost.
		if c.Site.Filename != "" && !slices.Contains(c.Stack, c.Site) {
			stack = append(stack, fmt.Sprintf("%s(%d): %s", c.Site.Filename, c.Site.Line, c.Site.Name))
		}
		for i := len(c.Stack) - 1; i >= 0; i-- {
			// Written like python_function names so one parser serves both.
			f := c.Stack[i]
			stack = append(stack, fmt.Sprintf("%s(%d): %s", f.Filename, f.Line, f.Name))
		}
		s := LeakSuspect{Bytes: c.Bytes, Blocks: int64(c.Count), Operator: "", Stack: nonNil(stack), FirstStep: -1, LastStep: -1, StepsWithSurvivors: c.Steps}
		if c.Steps >= 3 {
			s.BytesPerStep = c.Bytes / int64(c.Steps)
			out.Suspects = append(out.Suspects, s)
		} else if out.WholeWindow {
			out.Suspects = append(out.Suspects, s)
		}
	}
	slices.SortFunc(out.Suspects, func(a, b LeakSuspect) int {
		return cmp.Or(cmp.Compare(b.BytesPerStep, a.BytesPerStep), cmp.Compare(b.Bytes, a.Bytes))
	})
	if out.WholeWindow {
		return out
	}
	for _, s := range out.Suspects {
		out.GrowthBytesPerStep += s.BytesPerStep
	}
	if out.GrowthBytesPerStep >= opts.MinBytesPerStep && len(out.Suspects) > 0 {
		out.Verdict = VerdictLeak
		out.Reason = fmt.Sprintf("%s per step never freed: allocations from %d steps at %s are still alive", memtimeline.FormatBytes(out.GrowthBytesPerStep), out.Suspects[0].StepsWithSurvivors, siteName(out.Suspects[0].Stack, ""))
	} else {
		out.Verdict = VerdictClean
		out.Reason = fmt.Sprintf("no site keeps memory from 3 or more steps; %s never freed comes from one-off allocations (parameters, optimizer state, the last step)", memtimeline.FormatBytes(out.UnreleasedBytes))
	}
	return out
}

func init() {
	Register(&Rule{
		ID:          "snapshot.leak",
		Description: "Allocator snapshot: allocations from step after step at the same line were never freed",
		Severity:    Error,
		Threshold:   1 << 20,
		Unit:        "bytes_per_step",
		Check: func(r *Rule, in *Input) []Finding {
			if in.Snapshot == nil {
				return nil
			}
			opts := DefaultLeakOptions()
			opts.MinBytesPerStep = int64(r.Threshold)
			rep := AnalyzeSnapshotLeaks(in.SnapshotReport(), opts)
			if rep.Verdict != VerdictLeak {
				return nil
			}
			s := rep.Suspects[0]
			return []Finding{{
				Title:    fmt.Sprintf("Leak: %s per step never freed at %s", memtimeline.FormatBytes(s.BytesPerStep), siteName(s.Stack, "")),
				Detail:   fmt.Sprintf("%d allocations (%s) made in %d steps were never freed.", s.Blocks, memtimeline.FormatBytes(s.Bytes), s.StepsWithSurvivors),
				Advice:   "Find what keeps a reference to these tensors at that line.",
				Location: LocationOf(s.Stack),
				Metrics:  map[string]float64{"bytes_per_step": float64(s.BytesPerStep), "blocks": float64(s.Blocks)},
			}}
		},
	})
	Register(&Rule{
		ID:          "snapshot.oom",
		Description: "Allocator snapshot: the history records an out-of-memory",
		Severity:    Error,
		Threshold:   1,
		Unit:        "events",
		Check: func(r *Rule, in *Input) []Finding {
			if in.Snapshot == nil {
				return nil
			}
			ooms := in.SnapshotReport().OOMs
			if float64(len(ooms)) < r.Threshold {
				return nil
			}
			o := ooms[0]
			var loc *Location
			if o.Site.Filename != "" {
				loc = &Location{File: o.Site.Filename, Line: o.Site.Line, Function: o.Site.Name}
			}
			return []Finding{{
				Title:    fmt.Sprintf("Out of memory on device %d: %s requested, %s free on the device", o.Device, memtimeline.FormatBytes(o.RequestedBytes), memtimeline.FormatBytes(o.DeviceFreeBytes)),
				Detail:   fmt.Sprintf("%d OOM entries in the recorded history.", len(ooms)),
				Advice:   "Lower the batch size or activation memory; if reserved is far above allocated, try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
				Location: loc,
				Metrics:  map[string]float64{"oom_events": float64(len(ooms)), "request_bytes": float64(o.RequestedBytes)},
			}}
		},
	})
	Register(&Rule{
		ID:          "snapshot.inactive-split",
		Description: "Allocator snapshot: free blocks trapped inside partly used segments (empty_cache cannot return them) exceed this fraction of reserved",
		Severity:    Warning,
		Threshold:   0.2,
		Unit:        "fraction",
		Check: func(r *Rule, in *Input) []Finding {
			if in.Snapshot == nil {
				return nil
			}
			st := in.SnapshotReport().Stats
			if st.ReservedBytes == 0 {
				return nil
			}
			frac := float64(st.InactiveSplitBytes) / float64(st.ReservedBytes)
			if frac <= r.Threshold {
				return nil
			}
			return []Finding{{
				Title:   fmt.Sprintf("Fragmentation: %s (%.0f%% of reserved) is free but split inside used segments", memtimeline.FormatBytes(st.InactiveSplitBytes), 100*frac),
				Detail:  fmt.Sprintf("Reserved %s, allocated %s; the largest free block is %s.", memtimeline.FormatBytes(st.ReservedBytes), memtimeline.FormatBytes(st.AllocatedBytes), memtimeline.FormatBytes(st.LargestFreeBlock)),
				Advice:  "Try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or max_split_size_mb to stop large blocks being split; pre-allocate buffers of fixed sizes.",
				Metrics: map[string]float64{"fraction": frac, "inactive_split_bytes": float64(st.InactiveSplitBytes), "reserved_bytes": float64(st.ReservedBytes)},
			}}
		},
	})
}
