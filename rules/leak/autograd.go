package leak

import (
	"cmp"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
)

// Autograd evidence of one block.
const (
	blockNoGraph = iota
	blockGraph
	blockGraphBackwardRan
	blockBackwardMade
)

// graphIndex answers, per allocation, whether the op that made it
// recorded an autograd node, and whether that node's backward ran. The
// profiler records the thread's next sequence number at every op; an op
// created a node exactly when the next forward op on its thread starts
// with a higher number. Backward ops carry their forward op's number.
type graphIndex struct {
	t    *chrometrace.Trace
	attr *chrometrace.Attribution
	// known is false for traces without sequence numbers.
	known       bool
	created     map[int32]bool // forward HostOps index -> recorded a node
	backwardRan map[int64]bool // sequence numbers with a backward op
}

func newGraphIndex(t *chrometrace.Trace, attr *chrometrace.Attribution) *graphIndex {
	g := &graphIndex{t: t, attr: attr, created: map[int32]bool{}, backwardRan: map[int64]bool{}}
	fwd := map[chrometrace.ThreadID][]int32{}
	for i := range t.HostOps {
		o := &t.HostOps[i]
		if o.SeqNr < 0 || o.Cat != chrometrace.CatCPUOp {
			continue
		}
		g.known = true
		if attr.IsBackwardOp(int32(i)) {
			g.backwardRan[o.SeqNr] = true
			continue
		}
		fwd[o.Thread] = append(fwd[o.Thread], int32(i))
	}
	for _, ops := range fwd {
		slices.SortFunc(ops, func(a, b int32) int { return cmp.Compare(t.HostOps[a].Start, t.HostOps[b].Start) })
		for k, i := range ops {
			end := t.HostOps[i].End()
			// The next op that starts after this one ends (not nested in it).
			j, _ := slices.BinarySearchFunc(ops[k+1:], end, func(x int32, ts int64) int { return cmp.Compare(t.HostOps[x].Start, ts+1) })
			if k+1+j < len(ops) {
				g.created[i] = t.HostOps[ops[k+1+j]].SeqNr > t.HostOps[i].SeqNr
			} else {
				g.created[i] = g.backwardRan[t.HostOps[i].SeqNr]
			}
		}
	}
	return g
}

// blockKind classifies the allocation at Memory index i.
func (g *graphIndex) blockKind(i int) int {
	if i < 0 || i >= len(g.attr.Events) {
		return blockNoGraph
	}
	ev := g.attr.Events[i]
	if ev.Forward >= 0 {
		return blockBackwardMade
	}
	for op := ev.Op; op >= 0; op = g.attr.OpParent(op) {
		o := &g.t.HostOps[op]
		if o.SeqNr < 0 || o.Cat != chrometrace.CatCPUOp {
			continue
		}
		if g.attr.IsBackwardOp(op) {
			return blockBackwardMade
		}
		if !g.created[op] {
			return blockNoGraph
		}
		if g.backwardRan[o.SeqNr] {
			return blockGraphBackwardRan
		}
		return blockGraph
	}
	return blockNoGraph
}

// enteredBeforeProfiling counts the outermost frames of allocation i's
// stack that were already running when profiling began: the profiler
// names them by the line they were at then, not by their def line.
func (g *graphIndex) enteredBeforeProfiling(i int32, firstStep int64) int {
	if i < 0 {
		return 0
	}
	n := 0
	for _, f := range g.attr.PyFrameChain(int(i)) {
		if g.t.PyFrames[f].Start >= firstStep {
			break
		}
		if !chrometrace.IsLibraryFrame(g.t.Str(g.t.PyFrames[f].Name)) {
			n++
		}
	}
	return n
}
