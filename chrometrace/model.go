package chrometrace

// StrID indexes Trace.Strings. Names, categories and stack frames repeat
// millions of times in a large trace; storing each once keeps the model small.
type StrID uint32

// NoStr is the StrID of the empty string; it is always index 0.
const NoStr StrID = 0

// ThreadID indexes Trace.Threads.
type ThreadID uint32

// Category is the Kineto event category ("cat") of a duration event.
type Category uint8

const (
	CatOther Category = iota
	CatCPUOp
	CatUserAnnotation
	CatCUDARuntime
	CatCUDADriver
	CatOverhead
	CatPythonFunction
	CatKernel
	CatGPUMemcpy
	CatGPUMemset
	CatGPUUserAnnotation
	CatTrace
)

var categoryNames = [...]string{
	CatOther:             "other",
	CatCPUOp:             "cpu_op",
	CatUserAnnotation:    "user_annotation",
	CatCUDARuntime:       "cuda_runtime",
	CatCUDADriver:        "cuda_driver",
	CatOverhead:          "overhead",
	CatPythonFunction:    "python_function",
	CatKernel:            "kernel",
	CatGPUMemcpy:         "gpu_memcpy",
	CatGPUMemset:         "gpu_memset",
	CatGPUUserAnnotation: "gpu_user_annotation",
	CatTrace:             "Trace",
}

func (c Category) String() string {
	if int(c) < len(categoryNames) {
		return categoryNames[c]
	}
	return "other"
}

func parseCategory(s string) Category {
	switch s {
	// torch 1.8/1.9 (Kineto's first schema) wrote Operator, Runtime and
	// Kernel for cpu_op, cuda_runtime and kernel; ProfilerStep#N was an
	// Operator then. Other back ends name their runtime after the device
	// (xpu_runtime, mtia_runtime, privateuse1_runtime): torch nests and
	// counts them like cuda_runtime.
	case "cpu_op", "Operator":
		return CatCPUOp
	case "user_annotation":
		return CatUserAnnotation
	case "cuda_runtime", "Runtime", "xpu_runtime", "mtia_runtime", "privateuse1_runtime":
		return CatCUDARuntime
	case "cuda_driver", "xpu_driver", "privateuse1_driver":
		return CatCUDADriver
	case "overhead":
		return CatOverhead
	case "python_function":
		return CatPythonFunction
	case "kernel", "Kernel":
		return CatKernel
	case "gpu_memcpy", "Memcpy":
		return CatGPUMemcpy
	case "gpu_memset", "Memset":
		return CatGPUMemset
	case "gpu_user_annotation":
		return CatGPUUserAnnotation
	case "Trace":
		return CatTrace
	}
	return CatOther
}

// IsHostOperator reports whether events of this category are operators in
// torch's key_averages() sense: host-side ranges that nest and own memory.
func (c Category) IsHostOperator() bool {
	switch c {
	case CatCPUOp, CatUserAnnotation, CatCUDARuntime, CatCUDADriver, CatOverhead:
		return true
	}
	return false
}

// IsDevice reports whether events of this category run on a GPU stream.
func (c Category) IsDevice() bool {
	switch c {
	case CatKernel, CatGPUMemcpy, CatGPUMemset, CatGPUUserAnnotation:
		return true
	}
	return false
}

// DeviceType is c10::DeviceType as the profiler records it in [memory] events.
type DeviceType int8

const (
	DeviceCPU         DeviceType = 0
	DeviceCUDA        DeviceType = 1
	DeviceHIP         DeviceType = 6
	DeviceXPU         DeviceType = 12
	DeviceMPS         DeviceType = 13
	DevicePrivateUse1 DeviceType = 20
)

// IsGPU reports whether memory on this device type is accelerator memory.
// HIP builds of torch report their GPUs as CUDA, but other back ends differ.
func (d DeviceType) IsGPU() bool {
	switch d {
	case DeviceCUDA, DeviceHIP, DeviceXPU, DeviceMPS, DevicePrivateUse1:
		return true
	}
	return false
}

func (d DeviceType) String() string {
	switch d {
	case DeviceCPU:
		return "cpu"
	case DeviceCUDA:
		return "cuda"
	case DeviceHIP:
		return "hip"
	case DeviceXPU:
		return "xpu"
	case DeviceMPS:
		return "mps"
	case DevicePrivateUse1:
		return "privateuse1"
	}
	return "device"
}

// Thread is one (pid, tid) lane of the trace. Kineto writes integers for
// host threads and GPU streams but strings for some lanes ("Spans").
type Thread struct {
	Pid, Tid StrID // the JSON text of pid and tid, numbers unquoted
	// PidNum and TidNum are the numeric values, or -1 for string lanes.
	PidNum, TidNum int64
	Name           StrID // from thread_name metadata, if any
}

// HostOp is one host-side duration event that can own memory: a cpu_op,
// user_annotation (ProfilerStep#N, record_function), cuda_runtime,
// cuda_driver or overhead range.
//
// Fields are ordered so that the record packs into 56 bytes (a 1 GB trace
// holds over a million of them).
type HostOp struct {
	Start, Dur int64 // nanoseconds
	// ExternalID links a host op to the kernels it launched and is the key
	// of fwdbwd flows; 0 when absent.
	ExternalID int64
	// SeqNr is the autograd sequence number ("Sequence number"), -1 when absent.
	SeqNr     int64
	Name      StrID
	Thread    ThreadID
	InputDims StrID // canonical "Input Dims" text, as torch prints input shapes
	CallStack StrID // "Call stack" arg, when the profiler wrote one
	// FwdThread is the forward thread of a backward op ("Fwd thread id"),
	// -1 when absent or beyond int32 (torch numbers its threads 1, 2, 3...).
	FwdThread int32
	Cat       Category
}

// End is the inclusive end of the op's range in nanoseconds.
func (o *HostOp) End() int64 { return o.Start + o.Dur }

// MemoryEvent is one [memory] instant: an allocation (Bytes > 0) or free
// (Bytes < 0) of the caching allocator, with the allocator totals after it.
type MemoryEvent struct {
	TS    int64 // nanoseconds
	Bytes int64
	Addr  uint64
	// TotalAllocated is the allocator's total after the event, or, where
	// the trace records no totals (torch < 1.10, Fields without
	// MemTotalAllocated), the running sum of Bytes on the event's device
	// from the start of the profiled window (Trace.Memory.DerivedAllocated).
	TotalAllocated int64
	TotalReserved  int64
	Thread         ThreadID
	DeviceType     DeviceType
	DeviceID       int8
	Fields         MemFields // which of Addr and the totals the event recorded
}

// MemFields says which optional fields a [memory] event carried. Torch
// before 1.10 wrote only Bytes, Device Type and Device Id.
type MemFields uint8

const (
	MemAddr MemFields = 1 << iota
	MemTotalAllocated
	MemTotalReserved
)

// MemorySchema says what the trace's [memory] events record, for the
// figures that need a field not every torch wrote.
type MemorySchema struct {
	// WithoutAddr counts device events without Addr: their blocks cannot be
	// paired into lifetimes, so lifetimes, per-block stacks and leak
	// candidates from blocks are not recorded for them.
	WithoutAddr int64
	// DerivedAllocated is true when no device event recorded Total
	// Allocated: TotalAllocated then holds the running sum of Bytes from
	// the window's start (relative: memory allocated before the window is
	// not in it), as the TensorBoard plugin drew torch 1.8 traces.
	DerivedAllocated bool
	// NoReserved is true when no device event recorded Total Reserved:
	// reserved memory is not recorded (TotalReserved stays 0, not a figure).
	NoReserved bool
}

// Lifetimes reports whether blocks can be paired: every device event
// carries Addr.
func (m MemorySchema) Lifetimes() bool { return m.WithoutAddr == 0 }

// OOMEvent is an [OutOfMemory] instant: Bytes is the request that failed.
type OOMEvent struct {
	TS             int64
	Bytes          int64
	TotalAllocated int64
	TotalReserved  int64
	Thread         ThreadID
	DeviceType     DeviceType
	DeviceID       int8
}

// PyFrame is one python_function range (recorded with with_stack=True).
type PyFrame struct {
	Start, Dur int64
	Name       StrID // "file.py(123): func" or "nn.Module: Linear_0"
	Thread     ThreadID
	ID         int32 // "Python id"
	ParentID   int32 // "Python parent id", -1 at the root
}

// End is the inclusive end of the frame in nanoseconds.
func (f *PyFrame) End() int64 { return f.Start + f.Dur }

// DeviceOp is one GPU-side event: a kernel, memcpy, memset or GPU copy of a
// user annotation.
type DeviceOp struct {
	Start, Dur int64
	Name       StrID
	Thread     ThreadID // pid = device index, tid = stream
	Cat        Category
	Device     int16
	Stream     int32
	ExternalID int64
	Bytes      int64 // memcpy/memset size, 0 otherwise
}

// End is the inclusive end of the op in nanoseconds.
func (d *DeviceOp) End() int64 { return d.Start + d.Dur }

// Flow is one end of an s/f flow arrow (fwdbwd: forward op -> backward op;
// ac2g: launch -> kernel).
type Flow struct {
	TS     int64
	ID     int64
	Thread ThreadID
	Cat    StrID
	Start  bool // "s" (true) or "f" (false)
}

// Step is one ProfilerStep#N window of a scheduled profiler.
type Step struct {
	Number     int64
	Start, Dur int64
	Thread     ThreadID
}

// End is the inclusive end of the step in nanoseconds.
func (s *Step) End() int64 { return s.Start + s.Dur }

// DeviceProperties is one entry of the trace's deviceProperties.
type DeviceProperties struct {
	ID             int64  `json:"id"`
	Name           string `json:"name"`
	TotalGlobalMem int64  `json:"totalGlobalMem"`
	ComputeMajor   int64  `json:"computeMajor"`
	ComputeMinor   int64  `json:"computeMinor"`
	NumSMs         int64  `json:"numSms"`
}

// DistributedInfo is the trace's distributedInfo (DDP/FSDP runs).
type DistributedInfo struct {
	Backend   string `json:"backend"`
	Rank      int64  `json:"rank"`
	WorldSize int64  `json:"world_size"`
}

// Metadata holds the trace's top-level fields other than traceEvents.
type Metadata struct {
	SchemaVersion       int64
	TraceID             string
	TraceName           string
	DisplayTimeUnit     string
	BaseTimeNanoseconds int64
	// ProfileMemory, WithStack and RecordShapes are -1 when the trace does
	// not say (older traces), else 0 or 1.
	ProfileMemory      int64
	WithStack          int64
	RecordShapes       int64
	CUDADriverVersion  int64
	CUDARuntimeVersion int64
	CUPTIVersion       int64
	Devices            []DeviceProperties
	Distributed        *DistributedInfo
	// Legacy is true for a bare-array trace (no top-level object).
	Legacy bool
}

// Truncation describes where an incomplete trace stopped.
type Truncation struct {
	Offset int64  // bytes of (decompressed) input consumed when it stopped
	Events int64  // events read before the cut
	Reason string // what was missing
}

// Trace is the whole parsed trace. Slices are in file order; analyses sort
// copies or index slices as they need (file order is not time order).
type Trace struct {
	Meta      Metadata
	Strings   []string
	Threads   []Thread
	HostOps   []HostOp
	Memory    []MemoryEvent
	OOMs      []OOMEvent
	PyFrames  []PyFrame
	DeviceOps []DeviceOp
	Flows     []Flow
	Steps     []Step
	// Events counts every trace event read, including ones not kept.
	Events int64
	// InputBytes is the size of the (decompressed) JSON read.
	InputBytes int64
	Truncated  *Truncation
	Warnings   []string
	// MemorySchema says which [memory] fields the trace recorded.
	MemorySchema MemorySchema
	// Unread counts X events of categories the model does not read
	// (MTIA's mtia_ccp_events, ...), by category, for the warning that
	// names them.
	Unread map[string]int64

	// speculativeBatches counts batches read the fast way (tests check
	// that the fast path ran).
	speculativeBatches int
	// reservedLists says the record lists were sized from the input's
	// size hint (see builder.reserve), for tests.
	reservedLists bool
	// regrownLists counts the reserved slices that filled up and were
	// reserved again (chunked.grow), copiedLists the lists that finish
	// copied from chunks (flatten), for tests.
	regrownLists, copiedLists int
	// skippedPyFrames counts the python_function events read but not kept
	// (ReadOptions.SkipPyFrames).
	skippedPyFrames int64
}

// Str returns the string for id.
func (t *Trace) Str(id StrID) string { return t.Strings[id] }

// ThreadLabel is "pid/tid" for messages and goldens.
func (t *Trace) ThreadLabel(id ThreadID) string {
	th := t.Threads[id]
	return t.Strings[th.Pid] + "/" + t.Strings[th.Tid]
}
