package snapshot

import (
	"cmp"
	"slices"
)

// LiveSite is what one allocation site holds at the dump: the
// active_allocated blocks of the segments whose recorded stack names the
// same user frame.
type LiveSite struct {
	// Site is the block's user frame (UserFrame); the zero Frame for
	// blocks that carry no stack (the history was off when they were
	// allocated, or the snapshot was taken with include_traces=False).
	Site Frame `json:"site"`
	// Stack is the stack of the site's largest block, innermost first.
	Stack  []Frame `json:"stack,omitempty"`
	Bytes  int64   `json:"bytes"`
	Blocks int     `json:"blocks"`
	// Pool is the private pool the blocks live in (CUDA graphs,
	// torch.cuda.MemPool); the zero value for the default pool.
	Pool [2]int64 `json:"pool"`
}

// NoStack reports whether the site's blocks carry no recorded stack.
func (l LiveSite) NoStack() bool { return len(l.Stack) == 0 }

// LiveSites sums the snapshot's live blocks (active_allocated) by the site
// that allocated them (the user frame of each block's own stack) and the
// pool they live in, largest first. Unlike LeakCandidates it needs no
// recorded history: segments carry their blocks, and each block its stack
// when the history was on as it was allocated.
func (s *Snapshot) LiveSites() []LiveSite {
	type key struct {
		site Frame
		pool [2]int64
	}
	idx := map[key]int{}
	var out []LiveSite
	var biggest []int64
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if b.State != BlockActiveAllocated {
				continue
			}
			k := key{pool: seg.PoolID}
			if len(b.Frames) > 0 {
				k.site = UserFrame(b.Frames)
			}
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, LiveSite{Site: k.site, Pool: seg.PoolID})
				biggest = append(biggest, 0)
			}
			out[i].Bytes += b.Size
			out[i].Blocks++
			if b.Size > biggest[i] && len(b.Frames) > 0 {
				biggest[i] = b.Size
				out[i].Stack = b.Frames
			}
		}
	}
	slices.SortStableFunc(out, func(a, b LiveSite) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Site.Filename, b.Site.Filename), cmp.Compare(a.Site.Line, b.Site.Line))
	})
	return out
}
