package chrometrace

import (
	"cmp"
	"slices"
)

// StepCursor finds the step a time falls in among steps sorted by start.
// Analyses ask in (mostly) time order, millions of times: the previous
// answer is checked before a binary search. Not safe for concurrent use.
type StepCursor struct {
	steps []Step
	last  int
}

// NewStepCursor searches steps, which must be sorted by Start.
func NewStepCursor(steps []Step) *StepCursor { return &StepCursor{steps: steps, last: -1} }

// Of returns the index of the last step starting at or before ts (the step
// containing ts, else the last one started before it), -1 before the first.
func (c *StepCursor) Of(ts int64) int {
	s := c.steps
	if k := c.last; k >= 0 && s[k].Start <= ts && (k+1 == len(s) || s[k+1].Start > ts) {
		return k
	}
	k, _ := slices.BinarySearchFunc(s, ts, func(st Step, ts int64) int { return cmp.Compare(st.Start, ts+1) })
	c.last = k - 1
	return k - 1
}
