package chrometrace

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
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
	allocs     []int32 // events are indexed by int32: counts fit
	allocBytes []int64
}

// MemoryInTimeOrder is the indexes of the events keep selects, sorted by
// time, ties in file order (a stable sort). Events come nearly in time
// order: merging their runs beats a sort.
func MemoryInTimeOrder(events []MemoryEvent, keep func(*MemoryEvent) bool) []int32 {
	var sel []int32
	for i := range events {
		if keep(&events[i]) {
			if sel == nil {
				sel = make([]int32, 0, len(events)-i)
			}
			sel = append(sel, int32(i))
		}
	}
	sortNearlySorted(sel, nil, func(a, b int32) int { return cmp.Or(cmp.Compare(events[a].TS, events[b].TS), cmp.Compare(a, b)) })
	return sel
}

func newMemoryIndex(events []MemoryEvent, keep func(*MemoryEvent) bool) *memoryIndex {
	sel := MemoryInTimeOrder(events, keep)
	m := &memoryIndex{
		ts:         make([]int64, len(sel)),
		bytes:      make([]int64, len(sel)+1),
		allocs:     make([]int32, len(sel)+1),
		allocBytes: make([]int64, len(sel)+1),
	}
	if !m.fill(events, sel, math.MaxInt64) {
		// Some prefix sum left ±2^62, so differences of two could wrap:
		// only a trace claiming exabytes gets here. Reading each event as
		// at most ±1 TiB (more than any device has) keeps the sums exact
		// for millions of events and saturated, never negative, beyond.
		m.fill(events, sel, maxEventBytes)
	}
	return m
}

// maxEventBytes is what one memory event counts for at most once a trace's
// sums would overflow (see newMemoryIndex).
const maxEventBytes = 1 << 40

// fill computes the prefix sums with each event's bytes clamped to
// ±limit; it reports whether every sum stayed within ±2^62, where the
// difference of two sums cannot overflow.
func (m *memoryIndex) fill(events []MemoryEvent, sel []int32, limit int64) bool {
	const safe = 1 << 62
	ok := true
	for i, k := range sel {
		e := &events[k]
		b := max(min(e.Bytes, limit), -limit)
		m.ts[i] = e.TS
		m.bytes[i+1] = AddSat(m.bytes[i], b)
		m.allocs[i+1] = m.allocs[i]
		m.allocBytes[i+1] = m.allocBytes[i]
		if b > 0 {
			m.allocs[i+1]++
			m.allocBytes[i+1] = AddSat(m.allocBytes[i+1], b)
		}
		ok = ok && m.bytes[i+1] < safe && m.bytes[i+1] > -safe && m.allocBytes[i+1] < safe
	}
	return ok
}

// spanFrom returns the index range of events with start <= ts <= end
// given lo, the first event at or after start: torch counts an event at
// either boundary as inside (closed interval).
func (m *memoryIndex) spanFrom(lo int, end int64) (int, int) {
	hi := lo
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

// spanCursor finds the events of ranges whose starts mostly increase
// (the op tree's nodes in order: by start within each lane): the first
// event at or after a start is found by galloping on from the last one
// rather than by a binary search over all events.
type spanCursor struct {
	m    *memoryIndex
	lo   int   // the first event at or after last
	last int64 // the last start
}

func (m *memoryIndex) cursor() *spanCursor {
	return &spanCursor{m: m, last: math.MinInt64}
}

// span returns the index range of events with start <= ts <= end.
func (c *spanCursor) span(start, end int64) (lo, hi int) {
	ts := c.m.ts
	if start < c.last {
		c.lo, _ = slices.BinarySearch(ts, start) // a new lane
	} else {
		// Gallop from the last position, then search the last step.
		step := 1
		for c.lo+step < len(ts) && ts[c.lo+step-1] < start {
			c.lo += step
			step *= 2
		}
		k, _ := slices.BinarySearch(ts[c.lo:min(c.lo+step, len(ts))], start)
		c.lo += k
	}
	c.last = start
	return c.m.spanFrom(c.lo, end)
}

// parallelLane is the ops a lane needs for buildOpTree to do it beside
// the others.
const parallelLane = 1 << 16

// nestLane sorts the nodes lo..hi-1 of one lane by (start, -end), nests
// them the way torch's _populate_cpu_children does and removes their
// duplicates like EventList._remove_dup_nodes (see buildOpTree). tmp is
// scratch space, returned for reuse.
func (tr *opTree) nestLane(h []HostOp, lo, hi int32, childCount, tmp []int32, byTime func(a, b int32) int) []int32 {
	ops := tr.ops
	tmp = sortNearlySorted(ops[lo:hi], tmp, byTime)
	var stack []int32
	for i := lo; i < hi; i++ {
		tr.alive[i] = true
		tr.parent[i] = -1
		e := &h[ops[i]]
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
		stack = append(stack, i)
	}

	// Torch's pass removes a node whose parent has it as only child and
	// the same name, moving its children up to the parent. Parents come
	// before their children in ops order, so one pass in that order
	// decides every node with final facts: a node's parent was decided
	// before it (a removed parent hands its children to its own parent,
	// one step up, already decided too), and a parent's child count only
	// changes when its only child goes, becoming that child's count. A
	// count above one never drops, so torch's repeat passes find nothing
	// more; no child lists are needed (12 bytes a node saved).
	for i := lo; i < hi; i++ {
		p := tr.parent[i]
		if p >= 0 && !tr.alive[p] {
			p = tr.parent[p]
			tr.parent[i] = p
		}
		if p < 0 || childCount[p] != 1 || h[ops[p]].Name != h[ops[i]].Name {
			continue
		}
		childCount[p] = childCount[i]
		tr.alive[i] = false
	}
	return tmp
}

// opTree is the host operator forest after torch's nesting and duplicate
// removal; node i is HostOps[ops[i]].
type opTree struct {
	ops    []int32 // indices into Trace.HostOps, in (lane, start, -end) order
	parent []int32 // parent node or -1
	alive  []bool  // false for nodes removed as duplicates
	// lanes[l] is the first node of lane l (a thread; the profiler's
	// overhead ranges lie in the main thread's), lanes[len-1] the end.
	lanes []int32
}

// buildOpTree nests host operators per thread the way torch's
// _populate_cpu_children does, then removes duplicate nodes like
// EventList._remove_dup_nodes: a child with its parent's name that is the
// parent's only child disappears and its children move up.
//
// The second result is scratch space of one int32 per node that the
// caller may reuse.
func buildOpTree(t *Trace) (*opTree, []int32) {
	n := len(t.HostOps)
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
	// Order by (lane, start, -end), ties in file order. A counting sort
	// by lane (stable) and then a sort of each lane with the cheaper
	// comparison is several times faster than one sort on all keys.
	laneStart := make([]int32, len(t.Threads)+1)
	for i := range h {
		laneStart[lane(int32(i))+1]++
	}
	for l := 1; l < len(laneStart); l++ {
		laneStart[l] += laneStart[l-1]
	}
	ops := make([]int32, n)
	fill := slices.Clone(laneStart[:len(laneStart)-1])
	for i := range h {
		l := lane(int32(i))
		ops[fill[l]] = int32(i)
		fill[l]++
	}
	byTime := func(a, b int32) int {
		if c := cmp.Compare(h[a].Start, h[b].Start); c != 0 {
			return c
		}
		if c := cmp.Compare(h[b].End(), h[a].End()); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	tr := &opTree{ops: ops, parent: make([]int32, n), alive: make([]bool, n), lanes: laneStart}
	childCount := make([]int32, n)
	// Each lane is sorted, nested and rid of its duplicates on its own
	// (a node's parent is in its lane): the large ones side by side.
	var wg sync.WaitGroup
	var tmp []int32
	big := -1 // the last large lane, done here
	for l := 0; l+1 < len(laneStart); l++ {
		if laneStart[l+1]-laneStart[l] >= parallelLane {
			big = l
		}
	}
	for l := 0; l+1 < len(laneStart); l++ {
		lo, hi := laneStart[l], laneStart[l+1]
		if hi-lo >= parallelLane && l != big {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tr.nestLane(h, lo, hi, childCount, nil, byTime)
			}()
			continue
		}
		tmp = tr.nestLane(h, lo, hi, childCount, tmp, byTime)
	}
	wg.Wait()
	return tr, childCount
}

// sortNearlySorted sorts s by cmp, a total order. Kineto writes a thread's
// ops almost in time order (a handful of ascending runs), where merging the
// runs is many times faster than sorting; many runs fall back to a sort.
// tmp is scratch space, returned for reuse.
func sortNearlySorted(s, tmp []int32, cmp func(a, b int32) int) []int32 {
	const maxRuns = 256
	bounds := []int{0}
	for i := 1; i < len(s); i++ {
		if cmp(s[i-1], s[i]) > 0 {
			if len(bounds) == maxRuns {
				slices.SortFunc(s, cmp)
				return tmp
			}
			bounds = append(bounds, i)
		}
	}
	bounds = append(bounds, len(s))
	for len(bounds) > 2 {
		merged := []int{0}
		for i := 0; i+1 < len(bounds); i += 2 {
			if i+2 < len(bounds) {
				tmp = mergeRuns(s, bounds[i], bounds[i+1], bounds[i+2], tmp, cmp)
				merged = append(merged, bounds[i+2])
			} else {
				merged = append(merged, bounds[i+1])
			}
		}
		bounds = merged
	}
	return tmp
}

// mergeRuns merges the sorted runs s[lo:mid] and s[mid:hi] in place. The
// items of either run already in their place are found by binary search
// and left alone (the runs of a nearly sorted list overlap by a few
// items), and the shorter of what remains of the two is copied aside, so
// that tmp holds the few items out of place, not half the list.
func mergeRuns(s []int32, lo, mid, hi int, tmp []int32, cmp func(a, b int32) int) []int32 {
	// s[lo:mid] items up to s[mid] stay first; s[mid:hi] items from
	// s[mid-1] on stay last.
	lo += sort.Search(mid-lo, func(k int) bool { return cmp(s[lo+k], s[mid]) > 0 })
	hi = mid + sort.Search(hi-mid, func(k int) bool { return cmp(s[mid+k], s[mid-1]) > 0 })
	if lo == mid || mid == hi {
		return tmp
	}
	if mid-lo <= hi-mid {
		tmp = append(tmp[:0], s[lo:mid]...)
		a, b, k := 0, mid, lo
		for a < len(tmp) && b < hi {
			if cmp(s[b], tmp[a]) < 0 {
				s[k] = s[b]
				b++
			} else {
				s[k] = tmp[a]
				a++
			}
			k++
		}
		copy(s[k:], tmp[a:])
		return tmp
	}
	tmp = append(tmp[:0], s[mid:hi]...)
	a, b, k := mid-1, len(tmp)-1, hi-1
	for a >= lo && b >= 0 {
		if cmp(tmp[b], s[a]) < 0 {
			s[k] = s[a]
			a--
		} else {
			s[k] = tmp[b]
			b--
		}
		k--
	}
	copy(s[lo:], tmp[:b+1])
	return tmp
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
	ops, _ := operatorsOf(t, opts)
	return ops
}

// AttributeAndOperators is Attribute(t) and Operators(t, opts) at once:
// the operator tree both walk is built once (a million-op tree is 15 MB
// and a tenth of a second).
func AttributeAndOperators(t *Trace, opts OperatorOptions) (*Attribution, []OperatorStats) {
	return AttributeAndOperatorsWith(t, opts, Stages{})
}

// Stages are what a caller of AttributeAndOperatorsWith runs between and
// beside its stages; nil for nothing.
type Stages struct {
	// TableMade runs once the operator table is made and its memory
	// indexes are garbage, before the attribution allocates its lists
	// (a caller may return the memory to the OS then).
	TableMade func()
	// Meanwhile runs beside the attribution's last stage, which takes one
	// core of two, once the operator tree is garbage too.
	Meanwhile func()
}

// AttributeAndOperatorsWith is AttributeAndOperators with the caller's
// stages. The table comes first, its memory indexes garbage before the
// attribution allocates its lists, and the tree is garbage by the last
// stage: their memory does not add up.
func AttributeAndOperatorsWith(t *Trace, opts OperatorOptions, s Stages) (*Attribution, []OperatorStats) {
	ops, tree := operatorsOf(t, opts)
	if s.TableMade != nil {
		s.TableMade()
	}
	return attribute(t, tree, s.Meanwhile), ops
}

// operatorsOf is Operators, and the op tree it built.
func operatorsOf(t *Trace, opts OperatorOptions) ([]OperatorStats, *opTree) {
	// The memory indexes build while the op tree does.
	var dev, cpu *memoryIndex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		dev = newMemoryIndex(t.Memory, func(e *MemoryEvent) bool {
			return e.DeviceType.IsGPU() && (opts.Device < 0 || int(e.DeviceID) == opts.Device)
		})
		cpu = newMemoryIndex(t.Memory, func(e *MemoryEvent) bool { return e.DeviceType == DeviceCPU })
	}()
	tree, scratch := buildOpTree(t)

	rs := &operatorRows{groupBy: opts.GroupBy, rowOf: map[operatorRowKey]int32{}}
	nodeRow := rs.hostOps(t, tree, scratch)
	wg.Wait()
	sumOperatorMemory(t, tree, nodeRow, dev, cpu, rs.rows)
	// Torch keeps [OutOfMemory] instants as rows of their own (zero-length,
	// so they own no memory); [memory] instants are not rows.
	for range t.OOMs {
		extra, stack := groupExtra(t, opts.GroupBy, NoStr, NoStr)
		rs.rows[rs.get("[OutOfMemory]", extra, stack, false, false)].Calls++
	}
	for i := range t.DeviceOps {
		d := &t.DeviceOps[i]
		extra, stack := groupExtra(t, opts.GroupBy, NoStr, NoStr)
		r := rs.get(displayName(t.Str(d.Name)), extra, stack, true, d.Cat == CatGPUUserAnnotation)
		rs.rows[r].Calls++
	}
	out := rs.rows
	if out == nil {
		out = []OperatorStats{}
	}
	sortOperatorRows(out)
	return out, tree
}

// operatorRowKey is what makes ops share a row.
type operatorRowKey struct {
	name, extra          string
	onDevice, annotation bool
}

// operatorRows are the table's rows as they are made, by key.
type operatorRows struct {
	groupBy GroupBy
	rowOf   map[operatorRowKey]int32
	rows    []OperatorStats
}

// get is the row of an op (made on first use).
func (rs *operatorRows) get(name, extra string, stack []string, onDevice, annotation bool) int32 {
	k := operatorRowKey{name, extra, onDevice, annotation}
	r, ok := rs.rowOf[k]
	if !ok {
		r = int32(len(rs.rows))
		row := OperatorStats{Name: name, Stack: stack, OnDevice: onDevice, Annotation: annotation}
		if rs.groupBy == GroupByShape {
			row.InputShapes = extra
		}
		rs.rows = append(rs.rows, row)
		rs.rowOf[k] = r
	}
	return r
}

// hostOps gives every live node of the op tree its row and counts the
// calls; it returns the rows by node, in scratch.
func (rs *operatorRows) hostOps(t *Trace, tree *opTree, scratch []int32) []int32 {
	// Ops sharing name, grouping argument and kind share a row; keying
	// by string ids first skips building the row key for every op.
	type idKey struct {
		name, arg  StrID
		annotation bool
	}
	rowOfIDs := map[idKey]int32{}
	// By name alone (the default), the ids index a list: no hashing.
	var rowOfName []int32 // [2*name + annotation], -1 until made
	if rs.groupBy == GroupByName {
		rowOfName = make([]int32, 2*len(t.Strings))
		for i := range rowOfName {
			rowOfName[i] = -1
		}
	}
	nodeRow := scratch // every live node's entry is set below
	for i, k := range tree.ops {
		if !tree.alive[i] {
			continue
		}
		op := &t.HostOps[k]
		ik := idKey{name: op.Name, annotation: op.Cat == CatUserAnnotation}
		var r int32
		if rowOfName != nil {
			slot := 2 * int(op.Name)
			if ik.annotation {
				slot++
			}
			if r = rowOfName[slot]; r < 0 {
				r = rs.get(displayName(t.Str(op.Name)), "", nil, false, ik.annotation)
				rowOfName[slot] = r
			}
		} else {
			switch rs.groupBy {
			case GroupByShape:
				ik.arg = op.InputDims
			case GroupByStack:
				ik.arg = op.CallStack
			}
			var ok bool
			if r, ok = rowOfIDs[ik]; !ok {
				extra, stack := groupExtra(t, rs.groupBy, op.InputDims, op.CallStack)
				r = rs.get(displayName(t.Str(op.Name)), extra, stack, false, ik.annotation)
				rowOfIDs[ik] = r
			}
		}
		nodeRow[i] = r
		rs.rows[r].Calls++
	}
	return nodeRow
}

// sumOperatorMemory adds the memory of the live nodes to their rows. An
// op's memory counts fully in its own row (CUDA Mem) and is taken out of
// its parent's self figures; parents of live nodes are live. Parts of the
// ops sum into their own copies of the rows, added up after (integer
// sums: the order does not matter).
func sumOperatorMemory(t *Trace, tree *opTree, nodeRow []int32, dev, cpu *memoryIndex, rows []OperatorStats) {
	parts := 1
	if len(tree.ops) >= 1<<16 {
		parts = min(runtime.GOMAXPROCS(0), 4)
	}
	type memSums struct{ self, total, selfCPU, cpu, allocs, allocBytes int64 }
	sums := make([][]memSums, parts)
	var wg sync.WaitGroup
	for p := range parts {
		sums[p] = make([]memSums, len(rows))
		lo, hi := p*len(tree.ops)/parts, (p+1)*len(tree.ops)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := sums[p]
			devAt, cpuAt := dev.cursor(), cpu.cursor()
			for i := lo; i < hi; i++ {
				if !tree.alive[i] {
					continue
				}
				op := &t.HostOps[tree.ops[i]]
				a, b := devAt.span(op.Start, op.End())
				total := SubSat(dev.bytes[b], dev.bytes[a])
				allocs := int64(dev.allocs[b] - dev.allocs[a])
				allocBytes := SubSat(dev.allocBytes[b], dev.allocBytes[a])
				a, b = cpuAt.span(op.Start, op.End())
				cpuTotal := SubSat(cpu.bytes[b], cpu.bytes[a])
				r := &rs[nodeRow[i]]
				r.self = AddSat(r.self, total)
				r.total = AddSat(r.total, total)
				r.selfCPU = AddSat(r.selfCPU, cpuTotal)
				r.cpu = AddSat(r.cpu, cpuTotal)
				r.allocs += allocs
				r.allocBytes = AddSat(r.allocBytes, allocBytes)
				if parent := tree.parent[i]; parent >= 0 {
					pr := &rs[nodeRow[parent]]
					pr.self = SubSat(pr.self, total)
					pr.selfCPU = SubSat(pr.selfCPU, cpuTotal)
					pr.allocs -= allocs
					pr.allocBytes = SubSat(pr.allocBytes, allocBytes)
				}
			}
		}()
	}
	wg.Wait()
	for _, rs := range sums {
		for i, s := range rs {
			r := &rows[i]
			r.SelfDeviceMemory = AddSat(r.SelfDeviceMemory, s.self)
			r.DeviceMemory = AddSat(r.DeviceMemory, s.total)
			r.SelfCPUMemory = AddSat(r.SelfCPUMemory, s.selfCPU)
			r.CPUMemory = AddSat(r.CPUMemory, s.cpu)
			r.Allocs += s.allocs
			r.AllocBytes = AddSat(r.AllocBytes, s.allocBytes)
		}
	}
}

// sortOperatorRows orders the table by name, shapes, stack, host before
// device, ops before annotations.
func sortOperatorRows(out []OperatorStats) {
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
