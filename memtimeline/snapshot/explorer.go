package snapshot

import (
	"cmp"
	"slices"

	"github.com/torchmem/torchmem/memtimeline"
)

// Explorer builds the explorer of one device's recorded history in
// an allocator snapshot: each alloc paired with its completed free by
// address, a free without its alloc being a block from before the history,
// with the stack torch recorded at the allocation (snapshots carry no
// operator). Times are the entries' (µs, as ns).
func Explorer(entries Trace, n int) *memtimeline.Explorer {
	if n <= 0 {
		n = memtimeline.DefaultExplorerAllocs
	}
	type block struct {
		lt    memtimeline.Lifetime
		entry int
	}
	var blocks []block
	open := map[uint64]int{}
	for i, e := range entries.All() {
		switch e.Action {
		case ActionAlloc:
			open[e.Addr] = len(blocks)
			blocks = append(blocks, block{memtimeline.Lifetime{Bytes: e.Size, Start: e.TimeUS * 1000, End: -1}, i})
		case ActionFreeCompleted:
			if k, ok := open[e.Addr]; ok {
				delete(open, e.Addr)
				blocks[k].lt.End = e.TimeUS * 1000
			} else {
				blocks = append(blocks, block{memtimeline.Lifetime{Bytes: e.Size, Start: -1, End: e.TimeUS * 1000}, -1})
			}
		}
	}
	if len(blocks) == 0 {
		return nil
	}
	slices.SortStableFunc(blocks, func(a, b block) int {
		return cmp.Or(cmp.Compare(b.lt.Bytes, a.lt.Bytes), cmp.Compare(a.lt.Start, b.lt.Start), cmp.Compare(a.lt.End, b.lt.End))
	})
	ex := &memtimeline.Explorer{Total: len(blocks)}
	keep := min(n, len(blocks))
	for _, b := range blocks[:keep] {
		a := memtimeline.Allocation{Bytes: b.lt.Bytes, StartNs: b.lt.Start, EndNs: b.lt.End}
		if b.entry >= 0 {
			frames := entries.At(b.entry).Frames
			if len(frames) > 0 {
				a.Line = UserFrame(frames).String()
			}
			for k := len(frames) - 1; k >= 0; k-- { // torch records innermost first
				a.Stack = append(a.Stack, frames[k].String())
			}
		}
		ex.Allocs = append(ex.Allocs, a)
	}
	for _, b := range blocks[keep:] {
		ex.Rest = append(ex.Rest, b.lt)
	}
	return ex
}
