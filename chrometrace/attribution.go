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

// MemoryContext says what was running when one memory event happened.
type MemoryContext struct {
	// Op is the HostOps index of the innermost operator enclosing the event
	// on the event's thread, -1 for none.
	Op int32
	// Frame is the PyFrames index of the innermost Python frame: on the
	// event's thread, or for backward work at the forward op that created
	// the autograd node. -1 for none.
	Frame int32
	// Forward is the HostOps index of that forward op, -1 unless the event
	// happened in backward.
	Forward int32
}

// Attribution ties every memory event to its operator chain and Python
// stack. Backward-pass allocations run on the autograd thread, which has no
// Python frames; they are tied to the forward op with the same autograd
// sequence number, and so to the user's forward code.
type Attribution struct {
	Events      []MemoryContext // parallel to Trace.Memory
	opParent    []int32         // HostOps index -> enclosing HostOps index, -1
	frameParent []int32         // PyFrames index -> enclosing PyFrames index, -1
	// framesByThread lists PyFrames indices per thread by (start, -end).
	framesByThread map[ThreadID]frameList
	t              *Trace
	siteTab        siteTables
}

// Attribute computes the context of every memory event.
func Attribute(t *Trace) *Attribution {
	return attribute(t, nil, nil)
}

// attribute is Attribute with the op tree given (nil: built here), which
// it only reads. The operators (each event's innermost op) and the Python
// frames are independent: they are attributed side by side, and then,
// once the tree is garbage, the backward work (by forward op), while
// meanwhile (when set) runs beside it.
func attribute(t *Trace, tree *opTree, meanwhile func()) *Attribution {
	a := &Attribution{
		Events:   make([]MemoryContext, len(t.Memory)),
		opParent: make([]int32, len(t.HostOps)),
		t:        t,
	}
	for i := range a.Events {
		a.Events[i] = MemoryContext{Op: -1, Frame: -1, Forward: -1}
	}
	// The forward ops by sequence number read only the ops: on a large
	// trace they are indexed beside the rest, for the backward work.
	var fwd *seqIndex
	var fwdDone sync.WaitGroup
	if len(t.HostOps) >= parallelLane {
		fwdDone.Go(func() { fwd = forwardBySeq(t) })
	}
	memByThread := groupByThread(len(t.Memory), func(i int) (ThreadID, int64) { return t.Memory[i].Thread, t.Memory[i].TS })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.attributeFrames(memByThread)
	}()
	if tree == nil {
		tree, _ = buildOpTree(t)
	}
	a.attributeOps(tree, memByThread) // the tree's last reader
	wg.Wait()

	if meanwhile != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			meanwhile()
		}()
	}
	fwdDone.Wait()
	a.attributeBackward(fwd)
	wg.Wait()
	return a
}

// attributeOps sets every host op's visible parent (opParent) and every
// memory event's innermost op.
func (a *Attribution) attributeOps(tree *opTree, memByThread map[ThreadID][]int32) {
	t := a.t
	visible := func(node int32) int32 {
		for node >= 0 && (!tree.alive[node] || t.HostOps[tree.ops[node]].Cat == CatOverhead) {
			node = tree.parent[node]
		}
		return node
	}
	// Each node sets its own op's parent, so parts of the tree go side
	// by side; then each thread's events, which read those parents.
	inParts(len(tree.ops), func(lo, hi int) {
		for node := lo; node < hi; node++ {
			p := visible(tree.parent[node])
			if p >= 0 {
				p = tree.ops[p]
			}
			a.opParent[tree.ops[node]] = p
		}
	})
	var wg sync.WaitGroup
	for th, pts := range memByThread {
		if len(pts) >= parallelLane/16 { // a thread of 4096 events or more: on its own goroutine
			wg.Go(func() { a.innermostOps(tree, th, pts) })
		} else {
			a.innermostOps(tree, th, pts)
		}
	}
	wg.Wait()
}

// attributeFrames nests the Python frames of each thread by time
// (frameParent) and gives every memory event its innermost frame on its
// thread: the events of a thread swept in time order against its frames
// in start order rather than searched for one by one (frameAt).
func (a *Attribution) attributeFrames(memByThread map[ThreadID][]int32) {
	t := a.t
	a.framesByThread = framesByThread(t)
	a.frameParent = make([]int32, len(t.PyFrames))
	for i := range a.frameParent {
		a.frameParent[i] = -1
	}
	var stack []int32
	for _, ivs := range a.framesByThread {
		stack = stack[:0]
		for k := range ivs.len() {
			iv := ivs.at(k)
			f := &t.PyFrames[iv]
			for len(stack) > 0 && t.PyFrames[stack[len(stack)-1]].End() < f.Start {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 {
				a.frameParent[iv] = stack[len(stack)-1]
			}
			stack = append(stack, iv)
		}
	}
	for th, pts := range memByThread {
		ivs := a.framesByThread[th]
		n := ivs.len()
		k := 0 // ivs[:k] start at or before the event
		for _, p := range pts {
			ts := t.Memory[p].TS
			for k < n && t.PyFrames[ivs.at(k)].Start <= ts {
				k++
			}
			f := int32(-1)
			if k > 0 {
				f = ivs.at(k - 1)
				for f >= 0 && t.PyFrames[f].End() < ts {
					f = a.frameParent[f]
				}
			}
			a.Events[p].Frame = f
		}
	}
}

// frameList is one thread's Python frames in (start, -end) order, ties in
// index order: the PyFrames indices lo..lo+n-1 where the file holds them
// so (the usual trace: one thread runs Python and the profiler writes its
// frames in that order), a list of indices otherwise. The range takes no
// memory where the list took 4 bytes a frame.
type frameList struct {
	lo, n int32
	idx   []int32 // nil for the range
}

func (l frameList) len() int {
	if l.idx != nil {
		return len(l.idx)
	}
	return int(l.n)
}

// at is the k-th frame of the list.
func (l frameList) at(k int) int32 {
	if l.idx != nil {
		return l.idx[k]
	}
	return l.lo + int32(k)
}

// framesByThread lists each thread's Python frames in (start, -end)
// order: ranges where every thread's frames are contiguous in the file and
// in that order, else sorted lists.
func framesByThread(t *Trace) map[ThreadID]frameList {
	type span struct{ first, last, n int32 }
	spans := make([]span, len(t.Threads))
	ranges := true
	for i := range t.PyFrames {
		f := &t.PyFrames[i]
		sp := &spans[f.Thread]
		if sp.n > 0 {
			p := &t.PyFrames[sp.last]
			if sp.last != int32(i)-1 || p.Start > f.Start || (p.Start == f.Start && p.End() < f.End()) {
				ranges = false
				break
			}
		} else {
			sp.first = int32(i)
		}
		sp.last = int32(i)
		sp.n++
	}
	out := map[ThreadID]frameList{}
	if ranges {
		for th, sp := range spans {
			if sp.n > 0 {
				out[ThreadID(th)] = frameList{lo: sp.first, n: sp.n}
			}
		}
		return out
	}
	lists := groupIntervals(len(t.PyFrames), func(i int) (ThreadID, int64, int64, bool) {
		f := &t.PyFrames[i]
		return f.Thread, f.Start, f.End(), true
	})
	for th, l := range lists {
		out[th] = frameList{idx: l}
	}
	return out
}

// attributeBackward ties backward work to the forward op with the same
// autograd sequence number, and so to that op's Python frame. Only
// events with an operator but no Python frame of their own need it.
// firstBySeq is the index when built already (on a large trace, beside
// the other passes); nil builds it here, only when some event needs it.
func (a *Attribution) attributeBackward(firstBySeq *seqIndex) {
	if !slices.ContainsFunc(a.Events, func(ev MemoryContext) bool { return ev.Frame < 0 && ev.Op >= 0 }) {
		return
	}
	if firstBySeq == nil {
		firstBySeq = forwardBySeq(a.t)
	}
	// Each event is settled alone: parts of them go side by side.
	inParts(len(a.Events), func(lo, hi int) { a.backwardEvents(firstBySeq, lo, hi) })
}

// inParts calls f on parts of [0, n) side by side, one per CPU, when n is
// large enough to gain from it (parallelLane), else once on all of it.
// f must touch only its part's entries.
func inParts(n int, f func(lo, hi int)) {
	parts := 1
	if n >= parallelLane {
		parts = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	for part := range parts {
		wg.Go(func() { f(part*n/parts, (part+1)*n/parts) })
	}
	wg.Wait()
}

// backwardEvents is attributeBackward for a.Events[lo:hi].
func (a *Attribution) backwardEvents(firstBySeq *seqIndex, lo, hi int) {
	t := a.t
	lastFwd, lastFrame := int32(-1), int32(-1) // a backward node's events come together
	for i := lo; i < hi; i++ {
		ev := &a.Events[i]
		if ev.Frame >= 0 || ev.Op < 0 {
			continue
		}
		for op := ev.Op; op >= 0; op = a.opParent[op] {
			o := &t.HostOps[op]
			if o.SeqNr < 0 {
				continue
			}
			if fwd := firstBySeq.get(o.SeqNr); fwd >= 0 && t.HostOps[fwd].Thread != o.Thread {
				if fwd != lastFwd {
					lastFwd, lastFrame = fwd, a.frameAt(t.HostOps[fwd].Thread, t.HostOps[fwd].Start)
				}
				ev.Forward, ev.Frame = fwd, lastFrame
				break
			}
		}
	}
}

// innermostOps gives the memory events pts of thread th (in time order)
// their innermost enclosing operator: a sweep against the thread's ops in
// the tree's order, lane th with the profiler's overhead ranges left out
// (they lie in the main thread's lane but enclose no event of their own).
// An innermost duplicate node torch's pass removed stands for its parent,
// which is live: opParent skips removed nodes.
func (a *Attribution) innermostOps(tree *opTree, th ThreadID, pts []int32) {
	if int(th)+1 >= len(tree.lanes) {
		return // no ops on the thread: every event keeps Op -1
	}
	ops, mem := a.t.HostOps, a.t.Memory
	lo, hi := tree.lanes[th], tree.lanes[th+1]
	var stack []int32 // nodes
	next := lo
	for _, p := range pts {
		ts := mem[p].TS
		for next < hi && ops[tree.ops[next]].Start <= ts {
			node := next
			next++
			o := &ops[tree.ops[node]]
			if o.Cat == CatOverhead {
				continue
			}
			for len(stack) > 0 && ops[tree.ops[stack[len(stack)-1]]].End() < o.Start {
				stack = stack[:len(stack)-1]
			}
			stack = append(stack, node)
		}
		for len(stack) > 0 && ops[tree.ops[stack[len(stack)-1]]].End() < ts {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			node := stack[len(stack)-1]
			h := tree.ops[node]
			if !tree.alive[node] {
				h = a.opParent[h]
			}
			a.Events[p].Op = h
		}
	}
}

// seqIndex maps autograd sequence numbers to the first forward op that
// carries each: a slice where the numbers are dense (torch counts them up
// from 0), a map otherwise.
type seqIndex struct {
	min   int64
	dense []int32
	m     map[int64]int32
}

// get is the HostOps index of seq's forward op, -1 for none.
func (x *seqIndex) get(seq int64) int32 {
	if x.m != nil {
		if j, ok := x.m[seq]; ok {
			return j
		}
		return -1
	}
	if k := seq - x.min; seq >= x.min && k < int64(len(x.dense)) {
		return x.dense[k]
	}
	return -1
}

// forwardBySeq indexes the forward ops (cpu_ops with a sequence number,
// not autograd's own) by sequence number, the earliest of each (ties: the
// first in the file).
func forwardBySeq(t *Trace) *seqIndex {
	backward := make([]bool, len(t.Strings)) // by name, once per name
	for i, name := range t.Strings {
		backward[i] = isBackwardName(name)
	}
	forward := func(o *HostOp) bool { return o.SeqNr >= 0 && o.Cat == CatCPUOp && !backward[o.Name] }
	lo, hi, n := int64(math.MaxInt64), int64(-1), 0
	for i := range t.HostOps {
		if o := &t.HostOps[i]; forward(o) {
			lo, hi, n = min(lo, o.SeqNr), max(hi, o.SeqNr), n+1
		}
	}
	x := &seqIndex{min: lo}
	if n == 0 {
		return x
	}
	var first func(seq int64) (int32, bool)
	var set func(seq int64, i int32)
	if span := uint64(hi - lo); span < uint64(2*n+1024) {
		x.dense = make([]int32, span+1)
		for k := range x.dense {
			x.dense[k] = -1
		}
		first = func(seq int64) (int32, bool) { j := x.dense[seq-lo]; return j, j >= 0 }
		set = func(seq int64, i int32) { x.dense[seq-lo] = i }
	} else {
		x.m = map[int64]int32{}
		first = func(seq int64) (int32, bool) { j, ok := x.m[seq]; return j, ok }
		set = func(seq int64, i int32) { x.m[seq] = i }
	}
	for i := range t.HostOps {
		o := &t.HostOps[i]
		if !forward(o) {
			continue
		}
		if j, ok := first(o.SeqNr); !ok || o.Start < t.HostOps[j].Start {
			set(o.SeqNr, int32(i))
		}
	}
	return x
}

// frameAt returns the innermost Python frame on thread th that contains
// ts, or -1.
func (a *Attribution) frameAt(th ThreadID, ts int64) int32 {
	t := a.t
	ivs := a.framesByThread[th]
	// The innermost frame containing ts is the last one starting at or
	// before ts whose ancestors or itself still contain ts.
	after := ts + 1 // the first frame starting after ts (none found where this wraps)
	k := sort.Search(ivs.len(), func(k int) bool { return t.PyFrames[ivs.at(k)].Start >= after })
	if k == 0 {
		return -1
	}
	f := ivs.at(k - 1)
	for f >= 0 && t.PyFrames[f].End() < ts {
		f = a.frameParent[f]
	}
	return f
}

// PyStackAt returns the Python frames on thread th around time ts,
// outermost first: the stack of any host event (a cudaMalloc or cudaFree
// call), not only of memory events.
func (a *Attribution) PyStackAt(th ThreadID, ts int64) []string {
	var frames []string
	for f := a.frameAt(th, ts); f >= 0; f = a.frameParent[f] {
		frames = append(frames, a.t.Str(a.t.PyFrames[f].Name))
	}
	slices.Reverse(frames)
	return frames
}

// isBackwardName recognizes autograd node ops ("AddmmBackward0") and the
// engine's wrappers, which carry the sequence number of their forward op.
func isBackwardName(name string) bool {
	return strings.Contains(name, "Backward") || strings.HasPrefix(name, "autograd::engine::")
}

// groupByThread returns, per thread, point indices sorted by time (ties
// in index order).
func groupByThread(n int, key func(int) (ThreadID, int64)) map[ThreadID][]int32 {
	out := group(n, func(i int) (ThreadID, bool) { th, _ := key(i); return th, true })
	var tmp []int32
	for _, pts := range out {
		byTime := func(a, b int32) int {
			_, ta := key(int(a))
			_, tb := key(int(b))
			return cmp.Or(cmp.Compare(ta, tb), cmp.Compare(a, b))
		}
		tmp = sortNearlySorted(pts, tmp, byTime) // traces are mostly in time order already
	}
	return out
}

// groupIntervals returns, per thread, interval indices sorted by (start,
// -end), ties in index order.
func groupIntervals(n int, key func(int) (ThreadID, int64, int64, bool)) map[ThreadID][]int32 {
	out := group(n, func(i int) (ThreadID, bool) { th, _, _, keep := key(i); return th, keep })
	var tmp []int32
	for _, ivs := range out {
		order := func(a, b int32) int {
			_, sa, ea, _ := key(int(a))
			_, sb, eb, _ := key(int(b))
			return cmp.Or(cmp.Compare(sa, sb), cmp.Compare(eb, ea), cmp.Compare(a, b))
		}
		tmp = sortNearlySorted(ivs, tmp, order)
	}
	return out
}

// group lists the kept indices below n per thread, in index order. The
// lists are counted first and share one exactly sized array: appending
// per thread left about as much again in outgrown arrays (a million ops
// are 4 MB of indices). Threads index slices, not maps: ThreadIDs are
// small, and a map update per event was most of the grouping's time.
func group(n int, key func(int) (ThreadID, bool)) map[ThreadID][]int32 {
	var counts []int32 // per thread
	total := 0
	for i := 0; i < n; i++ {
		if th, keep := key(i); keep {
			if int(th) >= len(counts) {
				counts = append(counts, make([]int32, int(th)+1-len(counts))...)
			}
			counts[th]++
			total++
		}
	}
	all := make([]int32, total)
	lists := make([][]int32, len(counts))
	out := make(map[ThreadID][]int32)
	off := 0
	for th, c := range counts {
		if c > 0 {
			lists[th] = all[off : off : off+int(c)]
			off += int(c)
		}
	}
	for i := 0; i < n; i++ {
		if th, keep := key(i); keep {
			lists[th] = append(lists[th], int32(i))
		}
	}
	for th, l := range lists {
		if len(l) > 0 {
			out[ThreadID(th)] = l
		}
	}
	return out
}

// OpChain returns the operator names around memory event i, outermost
// first. ProfilerStep#N windows are left out: they differ every step and
// say nothing about the site.
func (a *Attribution) OpChain(i int) []string {
	return a.opChainFrom(a.Events[i].Op)
}

// HostOpChain returns the operators enclosing host op i (not i itself),
// outermost first, ProfilerStep#N windows left out: what was running when
// the runtime call i (a cudaMalloc, a cudaFree) was made.
func (a *Attribution) HostOpChain(i int) []string {
	return a.opChainFrom(a.opParent[i])
}

func (a *Attribution) opChainFrom(first int32) []string {
	var chain []string
	for op := first; op >= 0; op = a.opParent[op] {
		name := a.t.Str(a.t.HostOps[op].Name)
		if strings.HasPrefix(name, profilerStepPrefix) {
			continue
		}
		chain = append(chain, name)
	}
	slices.Reverse(chain)
	return chain
}

// ForwardOp returns the forward operator's name for backward work, or "".
func (a *Attribution) ForwardOp(i int) string {
	if f := a.Events[i].Forward; f >= 0 {
		return a.t.Str(a.t.HostOps[f].Name)
	}
	return ""
}

// PyStack returns the Python frames around memory event i, outermost first.
func (a *Attribution) PyStack(i int) []string {
	var frames []string
	for f := a.Events[i].Frame; f >= 0; f = a.frameParent[f] {
		frames = append(frames, a.t.Str(a.t.PyFrames[f].Name))
	}
	slices.Reverse(frames)
	return frames
}

// OpParent returns the HostOps index of the operator enclosing host op i
// (ProfilerStep windows included), or -1.
func (a *Attribution) OpParent(i int32) int32 {
	if i < 0 || int(i) >= len(a.opParent) {
		return -1
	}
	return a.opParent[i]
}

// IsBackwardOp reports whether host op i is autograd backward work (a
// node's op or the engine's wrapper around it).
func (a *Attribution) IsBackwardOp(i int32) bool {
	return isBackwardName(a.t.Str(a.t.HostOps[i].Name))
}

// PyFrameChain returns the PyFrames indices around memory event i,
// outermost first.
func (a *Attribution) PyFrameChain(i int) []int32 {
	var out []int32
	for f := a.Events[i].Frame; f >= 0; f = a.frameParent[f] {
		out = append(out, f)
	}
	slices.Reverse(out)
	return out
}
