package chrometrace

import (
	"math/rand/v2"
	"testing"
)

// TestStepCursor: the cursor answers as a binary search alone, in time
// order and out of it, with steps that start together.
func TestStepCursor(t *testing.T) {
	steps := []Step{{Start: 10, Dur: 5}, {Start: 20, Dur: 5}, {Start: 20, Dur: 1}, {Start: 30, Dur: 9}, {Start: 50, Dur: 1}}
	want := func(ts int64) int {
		k := -1
		for i, s := range steps {
			if s.Start <= ts {
				k = i
			}
		}
		return k
	}
	r := rand.New(rand.NewPCG(3, 4))
	c := NewStepCursor(steps)
	for ts := int64(0); ts < 60; ts++ { // in order
		if got := c.Of(ts); got != want(ts) {
			t.Fatalf("Of(%d) = %d, want %d", ts, got, want(ts))
		}
	}
	for range 500 { // any order
		ts := r.Int64N(70) - 5
		if got := c.Of(ts); got != want(ts) {
			t.Fatalf("Of(%d) = %d, want %d", ts, got, want(ts))
		}
	}
	if got := NewStepCursor(nil).Of(5); got != -1 {
		t.Fatalf("no steps: %d", got)
	}
}
