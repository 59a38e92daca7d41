package chrometrace

import (
	"cmp"
	"slices"
	"strings"
)

// GroupBy selects what besides the name keys an operator row, like the
// arguments of torch's key_averages().
type GroupBy int

const (
	GroupByName  GroupBy = iota
	GroupByStack         // group_by_stack_n=5: the op's "Call stack" top frames
	GroupByShape         // group_by_input_shape=True: "Input Dims"
)

// stackFrames is how many frames torch's group_by_stack_n=5 keeps.
const stackFrames = 5

// OperatorStats is one row of the per-operator memory table: torch's
// key_averages() row plus allocation counts.
type OperatorStats struct {
	Name string
	// InputShapes is set when grouping by shape, Stack when grouping by stack.
	InputShapes string
	Stack       []string
	Calls       int64
	// SelfDeviceMemory and DeviceMemory are torch's "Self CUDA Mem" and
	// "CUDA Mem": signed bytes allocated minus freed inside the op's range,
	// without and with its children.
	SelfDeviceMemory int64
	DeviceMemory     int64
	SelfCPUMemory    int64
	CPUMemory        int64
	// Allocs and AllocBytes count the device allocations (not frees) made
	// directly by the op, outside its children.
	Allocs     int64
	AllocBytes int64
	// OnDevice marks rows of GPU-side events (kernels, memcpy, GPU copies
	// of annotations), which own no memory but appear in torch's table.
	OnDevice bool
	// Annotation marks record_function / user annotation rows. Torch keys
	// rows by device type and annotation-ness as well as by name, so an
	// annotation and its GPU copy are two rows.
	Annotation bool
}

// OperatorOptions select what Operators aggregates.
type OperatorOptions struct {
	// Device limits device memory to one device index; -1 means all GPUs,
	// as torch sums them.
	Device  int
	GroupBy GroupBy
}

// memoryIndex answers "signed bytes of memory events inside [start, end]"
// in O(log n) with prefix sums over events sorted by time.
type memoryIndex struct {
	ts         []int64
	bytes      []int64 // prefix sums, len(ts)+1
	allocs     []int64
	allocBytes []int64
}

func newMemoryIndex(events []MemoryEvent, keep func(*MemoryEvent) bool) *memoryIndex {
	sel := make([]int, 0, len(events))
	for i := range events {
		if keep(&events[i]) {
			sel = append(sel, i)
		}
	}
	slices.SortStableFunc(sel, func(a, b int) int { return cmp.Compare(events[a].TS, events[b].TS) })
	m := &memoryIndex{
		ts:         make([]int64, len(sel)),
		bytes:      make([]int64, len(sel)+1),
		allocs:     make([]int64, len(sel)+1),
		allocBytes: make([]int64, len(sel)+1),
	}
	for i, k := range sel {
		e := &events[k]
		m.ts[i] = e.TS
		m.bytes[i+1] = m.bytes[i] + e.Bytes
		m.allocs[i+1] = m.allocs[i]
		m.allocBytes[i+1] = m.allocBytes[i]
		if e.Bytes > 0 {
			m.allocs[i+1]++
			m.allocBytes[i+1] += e.Bytes
		}
	}
	return m
}

// span returns the index range of events with start <= ts <= end: torch
// counts an event at either boundary as inside (closed interval).
func (m *memoryIndex) span(start, end int64) (lo, hi int) {
	lo, _ = slices.BinarySearch(m.ts, start)
	hi = lo
	for hi < len(m.ts) && m.ts[hi] <= end {
		// Short ranges are the common case; fall back to binary search
		// when the range covers many events.
		if hi-lo > 16 {
			h, found := slices.BinarySearch(m.ts[hi:], end)
			hi += h
			if found {
				for hi < len(m.ts) && m.ts[hi] == end {
					hi++
				}
			}
			break
		}
		hi++
	}
	return lo, hi
}

// opTree is the host operator forest after torch's nesting and duplicate
// removal; node i is HostOps[ops[i]].
type opTree struct {
	ops    []int32 // indices into Trace.HostOps, in (start, -end) order
	parent []int32 // parent node or -1
	alive  []bool  // false for nodes removed as duplicates
	nodeOf []int32 // HostOps index -> node, built on demand
}

// buildOpTree nests host operators per thread the way torch's
// _populate_cpu_children does, then removes duplicate nodes like
// EventList._remove_dup_nodes: a child with its parent's name that is the
// parent's only child disappears and its children move up.
func buildOpTree(t *Trace) *opTree {
	n := len(t.HostOps)
	ops := make([]int32, n)
	for i := range ops {
		ops[i] = int32(i)
	}
	h := t.HostOps
	// The profiler's own overhead ranges carry pid -1, but torch files
	// them under the thread that runs the profiler, where they enclose
	// that thread's ops (verified against torch on frag_small_allocs).
	main := t.MainThread()
	lane := func(i int32) ThreadID {
		if h[i].Cat == CatOverhead {
			return main
		}
		return h[i].Thread
	}
	slices.SortStableFunc(ops, func(a, b int32) int {
		if c := cmp.Compare(lane(a), lane(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(h[a].Start, h[b].Start); c != 0 {
			return c
		}
		return cmp.Compare(h[b].End(), h[a].End())
	})
	tr := &opTree{ops: ops, parent: make([]int32, n), alive: make([]bool, n)}
	childCount := make([]int32, n)
	var stack []int32
	for i := range ops {
		tr.alive[i] = true
		tr.parent[i] = -1
		e := &h[ops[i]]
		if i > 0 && lane(ops[i-1]) != lane(ops[i]) {
			stack = stack[:0]
		}
		for len(stack) > 0 {
			p := &h[ops[stack[len(stack)-1]]]
			if e.Start >= p.End() || e.End() > p.End() {
				stack = stack[:len(stack)-1]
				continue
			}
			tr.parent[i] = stack[len(stack)-1]
			childCount[stack[len(stack)-1]]++
			break
		}
		stack = append(stack, int32(i))
	}

	// Children lists move wholesale when a duplicate is removed, so each
	// node points at the list (by owner node) holding its children.
	childrenOf := make([][]int32, n)
	for i := range ops {
		if p := tr.parent[i]; p >= 0 {
			childrenOf[p] = append(childrenOf[p], int32(i))
		}
	}
	for changed := true; changed; {
		changed = false
		// Torch walks events in start order; parents precede children
		// in ops order within a thread, which is all that matters here.
		for i := range ops {
			if !tr.alive[i] {
				continue
			}
			p := tr.parent[i]
			if p < 0 || len(childrenOf[p]) != 1 || h[ops[p]].Name != h[ops[i]].Name {
				continue
			}
			childrenOf[p] = childrenOf[i]
			for _, c := range childrenOf[i] {
				tr.parent[c] = p
			}
			childrenOf[i] = nil
			tr.alive[i] = false
			changed = true
		}
	}
	return tr
}

// MainThread is the host thread that runs the training loop: the one with
// ProfilerStep annotations, else the one with the most operators.
func (t *Trace) MainThread() ThreadID {
	if len(t.Steps) > 0 {
		return t.Steps[0].Thread
	}
	counts := make([]int, len(t.Threads))
	best := ThreadID(0)
	for i := range t.HostOps {
		th := t.HostOps[i].Thread
		counts[th]++
		if counts[th] > counts[best] {
			best = th
		}
	}
	return best
}

// Operators aggregates the trace per operator exactly as torch's
// key_averages() does for "Self CUDA Mem" / "CUDA Mem" (FORMATS.md §2),
// adding allocation counts. Rows come out sorted by name.
func Operators(t *Trace, opts OperatorOptions) []OperatorStats {
	dev := newMemoryIndex(t.Memory, func(e *MemoryEvent) bool {
		return e.DeviceType.IsGPU() && (opts.Device < 0 || int(e.DeviceID) == opts.Device)
	})
	cpu := newMemoryIndex(t.Memory, func(e *MemoryEvent) bool { return e.DeviceType == DeviceCPU })
	tree := buildOpTree(t)
	n := len(tree.ops)

	total := make([]int64, n)
	cpuTotal := make([]int64, n)
	allocs := make([]int64, n)
	allocBytes := make([]int64, n)
	for i, k := range tree.ops {
		op := &t.HostOps[k]
		lo, hi := dev.span(op.Start, op.End())
		total[i] = dev.bytes[hi] - dev.bytes[lo]
		allocs[i] = dev.allocs[hi] - dev.allocs[lo]
		allocBytes[i] = dev.allocBytes[hi] - dev.allocBytes[lo]
		lo, hi = cpu.span(op.Start, op.End())
		cpuTotal[i] = cpu.bytes[hi] - cpu.bytes[lo]
	}
	self := slices.Clone(total)
	cpuSelf := slices.Clone(cpuTotal)
	selfAllocs := slices.Clone(allocs)
	selfAllocBytes := slices.Clone(allocBytes)
	for i := range tree.ops {
		if !tree.alive[i] {
			continue
		}
		if p := tree.parent[i]; p >= 0 {
			self[p] -= total[i]
			cpuSelf[p] -= cpuTotal[i]
			selfAllocs[p] -= allocs[i]
			selfAllocBytes[p] -= allocBytes[i]
		}
	}

	type key struct {
		name, extra          string
		onDevice, annotation bool
	}
	rows := map[key]*OperatorStats{}
	get := func(name, extra string, stack []string, onDevice, annotation bool) *OperatorStats {
		k := key{name, extra, onDevice, annotation}
		r := rows[k]
		if r == nil {
			r = &OperatorStats{Name: name, Stack: stack, OnDevice: onDevice, Annotation: annotation}
			if opts.GroupBy == GroupByShape {
				r.InputShapes = extra
			}
			rows[k] = r
		}
		return r
	}
	for i, k := range tree.ops {
		if !tree.alive[i] {
			continue
		}
		op := &t.HostOps[k]
		name := displayName(t.Str(op.Name))
		extra, stack := groupExtra(t, opts.GroupBy, op.InputDims, op.CallStack)
		r := get(name, extra, stack, false, op.Cat == CatUserAnnotation)
		r.Calls++
		r.SelfDeviceMemory += self[i]
		r.DeviceMemory += total[i]
		r.SelfCPUMemory += cpuSelf[i]
		r.CPUMemory += cpuTotal[i]
		r.Allocs += selfAllocs[i]
		r.AllocBytes += selfAllocBytes[i]
	}
	for i := range t.DeviceOps {
		d := &t.DeviceOps[i]
		extra, stack := groupExtra(t, opts.GroupBy, NoStr, NoStr)
		r := get(displayName(t.Str(d.Name)), extra, stack, true, d.Cat == CatGPUUserAnnotation)
		r.Calls++
	}
	out := make([]OperatorStats, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b OperatorStats) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := strings.Compare(a.InputShapes, b.InputShapes); c != 0 {
			return c
		}
		if c := slices.Compare(a.Stack, b.Stack); c != 0 {
			return c
		}
		if a.OnDevice != b.OnDevice {
			if a.OnDevice {
				return 1
			}
			return -1
		}
		if a.Annotation != b.Annotation {
			if a.Annotation {
				return 1
			}
			return -1
		}
		return 0
	})
	return out
}

// displayName folds ProfilerStep#N into ProfilerStep*, as torch does.
func displayName(name string) string {
	if strings.HasPrefix(name, profilerStepPrefix) {
		return "ProfilerStep*"
	}
	return name
}

func groupExtra(t *Trace, g GroupBy, dims, callStack StrID) (string, []string) {
	switch g {
	case GroupByShape:
		s := t.Str(dims)
		if s == "" {
			s = "[]"
		}
		return s, nil
	case GroupByStack:
		frames := splitCallStack(t.Str(callStack))
		if len(frames) > stackFrames {
			frames = frames[:stackFrames]
		}
		return strings.Join(frames, "\n"), frames
	}
	return "", nil
}

// splitCallStack splits Kineto's "Call stack" argument ("a;b;c").
func splitCallStack(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ";")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
