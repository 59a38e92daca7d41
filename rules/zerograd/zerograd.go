// Package zerograd finds optimizer steps without a gradient reset in a
// profiler trace: a silent training bug, not a memory leak (the .grad
// tensors stay the same size), that only the profiler's annotations show.
// torch's optimizers annotate every call (Optimizer.step#Adam.step,
// Optimizer.zero_grad#Adam.zero_grad), and backward's AccumulateGrad either
// adds into an existing .grad in place (aten::add_) or installs a fresh one
// (aten::detach, a copy) when .grad was None. Between two optimizer steps, a
// reset shows as a zero_grad annotation or as fresh gradients; in-place
// accumulation without either means each step applies the sum of every
// gradient since the start. Gradient accumulation on purpose (step and
// zero_grad every k batches) resets between steps and stays quiet.
//
// Analyze is a plain function over the trace; package rules caches it per
// input and turns it into the training.missing-zero-grad finding.
package zerograd

import (
	"cmp"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
)

// gradEvent is one thing between optimizer steps, in time order.
type gradEvent struct {
	ts   int64
	op   int32 // HostOps index
	kind uint8 // gradStep, gradZero, gradAddInPlace, gradFresh
}

const (
	gradStep uint8 = iota
	gradZero
	gradAddInPlace
	gradFresh
)

// Interval is the time between two optimizer steps.
type Interval struct {
	FromStep, ToStep int64 // ProfilerStep numbers of the two optimizer steps (-1 outside steps)
	Reset            bool  // a zero_grad annotation or fresh gradients in between
	InPlaceAdds      int   // AccumulateGrad calls adding into an existing .grad
	FreshGrads       int   // AccumulateGrad calls installing a new .grad
}

// Report is the evidence of rules' training.missing-zero-grad.
type Report struct {
	OptimizerSteps int
	ZeroGrads      int
	Intervals      []Interval
	// Offending are intervals with in-place accumulation and no reset.
	Offending int
	// StepOp is the first optimizer step annotation (for its location).
	StepOp int
}

// Analyze pairs consecutive optimizer steps and asks whether the
// gradients were reset between them.
func Analyze(t *chrometrace.Trace) Report {
	rep := Report{StepOp: -1}
	// What each name is, decided once per string, not once per op.
	const (
		other uint8 = iota
		step
		zero
		accumulate
		child // a child of AccumulateGrad that tells in place from fresh
		addInPlace
	)
	kinds := make([]uint8, len(t.Strings))
	for i, name := range t.Strings {
		switch {
		case strings.HasPrefix(name, "Optimizer.step#"):
			kinds[i] = step
		case strings.HasPrefix(name, "Optimizer.zero_grad#"):
			kinds[i] = zero
		case name == "torch::autograd::AccumulateGrad":
			kinds[i] = accumulate
		case name == "aten::add_":
			kinds[i] = addInPlace
		case name == "aten::detach" || name == "aten::copy_" || name == "aten::clone" || name == "aten::empty_like" || name == "aten::empty_strided":
			kinds[i] = child
		}
	}
	var evs []gradEvent
	// AccumulateGrad's children tell in place from fresh: index the
	// aten::add_ / aten::detach ops per thread to look inside each one.
	var acc []int32
	children := make([]int32, len(t.Threads)) // per thread
	isOp := func(h *chrometrace.HostOp) bool {
		return h.Cat == chrometrace.CatCPUOp || h.Cat == chrometrace.CatUserAnnotation
	}
	for i := range t.HostOps {
		h := &t.HostOps[i]
		if !isOp(h) {
			continue
		}
		switch kinds[h.Name] {
		case step:
			evs = append(evs, gradEvent{h.Start, int32(i), gradStep})
		case zero:
			evs = append(evs, gradEvent{h.Start, int32(i), gradZero})
		case accumulate:
			acc = append(acc, int32(i))
		case child, addInPlace:
			children[h.Thread]++
		}
	}
	if len(acc) > 0 {
		// Each thread's children in one exactly sized list (counted
		// above), sorted by start.
		byThread := make([][]int32, len(t.Threads))
		total := 0
		for _, n := range children {
			total += int(n)
		}
		all := make([]int32, 0, total)
		for th, n := range children {
			byThread[th] = all[len(all) : len(all) : len(all)+int(n)]
			all = all[:len(all)+int(n)]
		}
		for i := range t.HostOps {
			if h := &t.HostOps[i]; isOp(h) && (kinds[h.Name] == child || kinds[h.Name] == addInPlace) {
				byThread[h.Thread] = append(byThread[h.Thread], int32(i))
			}
		}
		for _, l := range byThread {
			slices.SortFunc(l, func(a, b int32) int { return cmp.Compare(t.HostOps[a].Start, t.HostOps[b].Start) })
		}
		evs = slices.Grow(evs, len(acc))
		for _, i := range acc {
			a := &t.HostOps[i]
			kind := gradFresh
			l := byThread[a.Thread]
			k, _ := slices.BinarySearchFunc(l, a.Start, func(j int32, ts int64) int { return cmp.Compare(t.HostOps[j].Start, ts) })
			for ; k < len(l) && t.HostOps[l[k]].Start <= a.End(); k++ {
				if kinds[t.HostOps[l[k]].Name] == addInPlace {
					kind = gradAddInPlace
					break
				}
			}
			evs = append(evs, gradEvent{a.Start, i, kind})
		}
	}
	slices.SortStableFunc(evs, func(a, b gradEvent) int { return cmp.Compare(a.ts, b.ts) })
	stepNo := func(ts int64) int64 {
		for _, s := range t.Steps {
			if s.Start <= ts && ts <= s.End() {
				return s.Number
			}
		}
		return -1
	}
	var cur *Interval
	for _, e := range evs {
		switch e.kind {
		case gradStep:
			rep.OptimizerSteps++
			if rep.StepOp < 0 {
				rep.StepOp = int(e.op)
			}
			n := stepNo(e.ts)
			if cur != nil {
				cur.ToStep = n
				rep.Intervals = append(rep.Intervals, *cur)
			}
			cur = &Interval{FromStep: n}
		case gradZero:
			rep.ZeroGrads++
			if cur != nil {
				cur.Reset = true
			}
		case gradAddInPlace:
			if cur != nil {
				cur.InPlaceAdds++
			}
		case gradFresh:
			if cur != nil {
				cur.FreshGrads++
				cur.Reset = true // .grad was None: freed since the last step
			}
		}
	}
	for _, iv := range rep.Intervals {
		if !iv.Reset && iv.InPlaceAdds > 0 {
			rep.Offending++
		}
	}
	return rep
}
