package chrometrace

import "fmt"

// Summary is what a user checks first about a trace: what was recorded,
// on which GPU, over how many steps, and the allocator's peaks.
type Summary struct {
	Events             int64  `json:"events"`
	DurationNs         int64  `json:"duration_ns"`
	Steps              int    `json:"steps"`
	FirstStep          int64  `json:"first_step"`
	LastStep           int64  `json:"last_step"`
	GPU                string `json:"gpu,omitempty"`
	GPUMemoryBytes     int64  `json:"gpu_memory_bytes,omitempty"`
	CUDARuntime        string `json:"cuda_runtime,omitempty"`
	CUDADriver         string `json:"cuda_driver,omitempty"`
	Rank               int64  `json:"rank"`
	WorldSize          int64  `json:"world_size"`
	ProfileMemory      bool   `json:"profile_memory"`
	WithStack          bool   `json:"with_stack"`
	RecordShapes       bool   `json:"record_shapes"`
	MemoryEvents       int    `json:"memory_events"`
	OOMEvents          int    `json:"oom_events"`
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64  `json:"peak_reserved_bytes"`
	// ReservedNotRecorded: the trace's [memory] events carry no Total
	// Reserved (torch < 1.10), so PeakReservedBytes is no figure.
	ReservedNotRecorded bool `json:"reserved_not_recorded,omitempty"`
	// AllocatedFromWindowStart: no Total Allocated either, so
	// PeakAllocatedBytes is the running sum of Bytes from the window's
	// start, relative to what was allocated before it.
	AllocatedFromWindowStart bool `json:"allocated_from_window_start,omitempty"`
	Truncated                bool `json:"truncated"`
}

// Summarize computes the summary for one device (-1: the first GPU seen).
func Summarize(t *Trace, device int) Summary {
	s := Summary{Events: t.Events, Rank: -1, WorldSize: 1}
	if d := t.Meta.Distributed; d != nil {
		s.Rank, s.WorldSize = d.Rank, d.WorldSize
	}
	for _, d := range t.Meta.Devices {
		if device < 0 || int(d.ID) == device {
			s.GPU, s.GPUMemoryBytes = d.Name, d.TotalGlobalMem
			break
		}
	}
	s.CUDARuntime = cudaVersion(t.Meta.CUDARuntimeVersion)
	s.CUDADriver = cudaVersion(t.Meta.CUDADriverVersion)
	var first, last int64 = -1, -1
	for _, o := range t.HostOps {
		if first < 0 || o.Start < first {
			first = o.Start
		}
		last = max(last, o.End())
	}
	if first >= 0 {
		s.DurationNs = last - first
	}
	s.Steps = len(t.Steps)
	for i, st := range t.Steps {
		if i == 0 || st.Number < s.FirstStep {
			s.FirstStep = st.Number
		}
		s.LastStep = max(s.LastStep, st.Number)
	}
	s.WithStack = t.Meta.WithStack == 1 || len(t.PyFrames) > 0 || t.skippedPyFrames > 0
	for i := 0; i < len(t.HostOps) && !s.WithStack; i++ {
		// torch 1.8/1.9 wrote the stack as an op's "Call stack" instead.
		s.WithStack = t.HostOps[i].CallStack != NoStr
	}
	s.RecordShapes = t.Meta.RecordShapes == 1
	for i := range t.Memory {
		e := &t.Memory[i]
		if !e.DeviceType.IsGPU() || (device >= 0 && int(e.DeviceID) != device) {
			continue
		}
		s.MemoryEvents++
		s.PeakAllocatedBytes = max(s.PeakAllocatedBytes, e.TotalAllocated)
		s.PeakReservedBytes = max(s.PeakReservedBytes, e.TotalReserved)
	}
	if s.MemoryEvents > 0 {
		s.ReservedNotRecorded = t.MemorySchema.NoReserved
		s.AllocatedFromWindowStart = t.MemorySchema.DerivedAllocated
	}
	s.ProfileMemory = t.Meta.ProfileMemory == 1 || len(t.Memory) > 0
	s.OOMEvents = len(t.OOMs)
	s.Truncated = t.Truncated != nil
	return s
}

// cudaVersion renders CUDA's integer versions: 13000 -> "13.0", 12040 -> "12.4".
func cudaVersion(v int64) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
}
