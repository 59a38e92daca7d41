package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// OperatorRow is one operator's row in JSON (ops, analyze, the page):
// torch's key_averages columns and the allocations it made itself.
type OperatorRow struct {
	Name                  string   `json:"name"`
	InputShapes           string   `json:"input_shapes,omitempty"`
	Stack                 []string `json:"stack,omitempty"`
	OnDevice              bool     `json:"on_device,omitempty"`
	Calls                 int64    `json:"calls"`
	SelfDeviceMemoryBytes int64    `json:"self_device_memory_bytes"`
	DeviceMemoryBytes     int64    `json:"device_memory_bytes"`
	SelfCPUMemoryBytes    int64    `json:"self_cpu_memory_bytes"`
	CPUMemoryBytes        int64    `json:"cpu_memory_bytes"`
	Allocs                int64    `json:"allocs"`
	AllocBytes            int64    `json:"alloc_bytes"`
	MeanAllocBytes        int64    `json:"mean_alloc_bytes"`
}

// SiteRow is one allocation site's row in JSON (stacks, analyze, the
// page): its frames, outermost first, and what it allocated and kept.
type SiteRow struct {
	Frames          []string `json:"frames"`
	Operator        string   `json:"operator"`
	ForwardOperator string   `json:"forward_operator,omitempty"`
	AllocBytes      int64    `json:"alloc_bytes"`
	LiveBytesAtEnd  int64    `json:"live_bytes_at_end"`
	LiveBytesAtPeak int64    `json:"live_bytes_at_peak"`
	Allocs          int64    `json:"allocs"`
	LiveBlocksAtEnd int64    `json:"live_blocks_at_end"`
}

// meanAlloc is an operator's mean allocation size (0 without allocations).
func meanAlloc(r chrometrace.OperatorStats) int64 {
	if r.Allocs == 0 {
		return 0
	}
	return r.AllocBytes / r.Allocs
}

// topN is how many of n rows top keeps: all for 0.
func topN(top, n int) int {
	if top <= 0 || top > n {
		return n
	}
	return top
}

// writeTraceSummary prints the few lines above the table that say what the
// trace is and what it recorded.
func writeTraceSummary(w io.Writer, path string, t *chrometrace.Trace, s chrometrace.Summary) {
	fmt.Fprintf(w, "Trace:    %s (%d events", path, s.Events)
	if s.DurationNs > 0 {
		fmt.Fprintf(w, ", %s", formatNS(s.DurationNs))
	}
	fmt.Fprintln(w, ")")
	if s.GPU != "" {
		fmt.Fprintf(w, "GPU:      %s", s.GPU)
		if s.GPUMemoryBytes > 0 { // MTIA traces give no totalGlobalMem
			fmt.Fprintf(w, ", %s", memtimeline.FormatBytes(s.GPUMemoryBytes))
		}
		if s.CUDARuntime != "" {
			fmt.Fprintf(w, ", CUDA runtime %s, driver %s", s.CUDARuntime, s.CUDADriver)
		}
		fmt.Fprintln(w)
	}
	if s.WorldSize > 1 || s.Rank >= 0 {
		fmt.Fprintf(w, "Rank:     %d of %d\n", s.Rank, s.WorldSize)
	}
	if s.Steps > 0 {
		fmt.Fprintf(w, "Steps:    %d profiled (ProfilerStep#%d..#%d)\n", s.Steps, s.FirstStep, s.LastStep)
	} else {
		fmt.Fprintln(w, "Steps:    none annotated (profile with a schedule to get ProfilerStep#N)")
	}
	if s.MemoryEvents > 0 {
		allocated, reserved := memtimeline.FormatBytes(s.PeakAllocatedBytes), memtimeline.FormatBytes(s.PeakReservedBytes)
		if s.AllocatedFromWindowStart {
			allocated += " above the window's start"
		}
		if s.ReservedNotRecorded {
			reserved = "not recorded"
		}
		fmt.Fprintf(w, "Memory:   peak allocated %s, peak reserved %s (%d allocator events)\n", allocated, reserved, s.MemoryEvents)
	}
	var rec []string
	for _, f := range []struct {
		on   bool
		name string
	}{{s.ProfileMemory, "profile_memory"}, {s.WithStack, "with_stack"}, {s.RecordShapes, "record_shapes"}} {
		mark := "off"
		if f.on {
			mark = "on"
		}
		rec = append(rec, f.name+" "+mark)
	}
	fmt.Fprintf(w, "Recorded: %s\n", strings.Join(rec, ", "))
	if !s.ProfileMemory {
		fmt.Fprintln(w, "Note:     no memory events in this trace: memory columns are all zero.\n"+
			"          Profile with torch.profiler.profile(..., profile_memory=True) to record them.")
	}
	if s.OOMEvents > 0 {
		fmt.Fprintf(w, "OOM:      %d out-of-memory events\n", s.OOMEvents)
	}
	fmt.Fprintln(w)
}

// signed prints a change of size with its sign ("+2.00 MB").
func signed(n int64) string {
	if n > 0 {
		return "+" + memtimeline.FormatBytes(n)
	}
	return memtimeline.FormatBytes(n)
}
