package snapshot

import (
	"cmp"
	"fmt"
	"slices"
)

// The allocator at an out-of-memory error. A snapshot shows its segments
// at the dump; when the dump came after the error (the script caught it,
// or the exception unwound and freed its tensors first), its free blocks
// are not the ones the failed request saw. The history after the OOM
// entry says what changed since, so undoing it, newest first, rebuilds
// the segments as they were when the request failed.

// smallSegmentBytes is the caching allocator's small-pool segment size
// (kSmallBuffer); smallRequestBytes the largest request it serves from
// the small pool (kSmallSize).
const (
	smallSegmentBytes = 2 << 20
	smallRequestBytes = 1 << 20
)

// PoolOf is the caching allocator pool a request of this size is served
// from: "small" up to 1 MiB, else "large".
func PoolOf(bytes int64) string {
	if bytes <= smallRequestBytes {
		return "small"
	}
	return "large"
}

// PoolState is one pool of one stream at a moment.
type PoolState struct {
	Pool           string `json:"pool"`
	Stream         int64  `json:"stream"`
	ReservedBytes  int64  `json:"reserved_bytes"`
	AllocatedBytes int64  `json:"allocated_bytes"`
	// FreeBytes are the pool's free blocks; SplitFreeBytes those inside
	// segments that also hold live blocks (the allocator's retry cannot
	// give them back); LargestFreeBlock the largest run of free bytes
	// (adjacent free blocks merge).
	FreeBytes        int64 `json:"free_bytes"`
	SplitFreeBytes   int64 `json:"split_free_bytes"`
	LargestFreeBlock int64 `json:"largest_free_block"`
}

// OOMState is the allocator of one device at an OOM entry.
type OOMState struct {
	// Exact: every event after the OOM was undone (or there was none:
	// AtDump); when false, Note says why and the figures are unknown.
	Exact  bool   `json:"exact"`
	AtDump bool   `json:"at_dump"`
	Undone int    `json:"undone_events"`
	Note   string `json:"note,omitempty"`
	// ReservedBytes .. SplitFreeBytes sum the device's pools.
	ReservedBytes  int64       `json:"reserved_bytes"`
	AllocatedBytes int64       `json:"allocated_bytes"`
	FreeBytes      int64       `json:"free_bytes"`
	SplitFreeBytes int64       `json:"split_free_bytes"`
	Pools          []PoolState `json:"pools"`
}

// Pool is the state of a pool and stream (zero value when absent).
func (st *OOMState) Pool(pool string, stream int64) PoolState {
	for _, p := range st.Pools {
		if p.Pool == pool && p.Stream == stream {
			return p
		}
	}
	return PoolState{Pool: pool, Stream: stream}
}

type piece struct {
	addr, size int64
	free       bool
}

type replaySeg struct {
	addr, size int64
	pool       string
	stream     int64
	pieces     []piece
}

func (g *replaySeg) contains(addr, size int64) bool {
	return addr >= g.addr && addr+size <= g.addr+g.size
}

// mark sets [addr, addr+size) free or in use, splitting pieces at its ends.
func (g *replaySeg) mark(addr, size int64, free bool) {
	end := addr + size
	var out []piece
	for _, p := range g.pieces {
		pend := p.addr + p.size
		if pend <= addr || p.addr >= end {
			out = append(out, p)
			continue
		}
		if p.addr < addr {
			out = append(out, piece{p.addr, addr - p.addr, p.free})
		}
		lo, hi := max(p.addr, addr), min(pend, end)
		out = append(out, piece{lo, hi - lo, free})
		if pend > end {
			out = append(out, piece{end, pend - end, p.free})
		}
	}
	g.pieces = out
}

// StateAtOOM rebuilds device dev's segments at its trace entry idx (an
// OOM entry) by undoing every later entry of that device's history.
func (s *Snapshot) StateAtOOM(dev, idx int) OOMState {
	st := OOMState{}
	if dev < 0 || dev >= len(s.DeviceTraces) || idx < 0 || idx >= s.DeviceTraces[dev].Len() {
		st.Note = "no such history entry"
		return st
	}
	var segs []*replaySeg
	for _, seg := range s.Segments {
		if seg.Device != dev {
			continue
		}
		g := &replaySeg{addr: int64(seg.Address), size: seg.TotalSize, pool: seg.SegmentType, stream: seg.Stream}
		if seg.IsExpandable {
			st.Note = "expandable segments map and unmap pages: not replayed"
			return st
		}
		off := g.addr
		for _, b := range seg.Blocks {
			g.pieces = append(g.pieces, piece{off, b.Size, b.State == BlockInactive})
			off += b.Size
		}
		segs = append(segs, g)
	}
	find := func(addr, size int64) int {
		for i, g := range segs {
			if g.contains(addr, size) {
				return i
			}
		}
		return -1
	}
	tr := s.DeviceTraces[dev]
	for i := tr.Len() - 1; i > idx; i-- {
		e := tr.At(i)
		addr := int64(e.Addr)
		switch e.Action {
		case ActionFreeCompleted, ActionAlloc:
			k := find(addr, e.Size)
			if k < 0 {
				st.Note = fmt.Sprintf("a later %s at %#x is in no segment the history accounts for", e.Action, e.Addr)
				return st
			}
			segs[k].mark(addr, e.Size, e.Action == ActionAlloc)
		case ActionSegmentAlloc:
			k := find(addr, e.Size)
			if k < 0 {
				st.Note = fmt.Sprintf("a later segment_alloc at %#x is not among the dump's segments", e.Addr)
				return st
			}
			segs = slices.Delete(segs, k, k+1)
		case ActionSegmentFree:
			pool := "large"
			if e.Size <= smallSegmentBytes {
				pool = "small"
			}
			segs = append(segs, &replaySeg{addr: addr, size: e.Size, pool: pool, stream: e.Stream, pieces: []piece{{addr, e.Size, true}}})
		case ActionSegmentMap, ActionSegmentUnmap:
			st.Note = "expandable segments map and unmap pages after the OOM: not replayed"
			return st
		default:
			continue
		}
		st.Undone++
	}
	st.Exact, st.AtDump = true, st.Undone == 0
	type key struct {
		pool   string
		stream int64
	}
	by := map[key]*PoolState{}
	for _, g := range segs {
		k := key{g.pool, g.stream}
		p := by[k]
		if p == nil {
			p = &PoolState{Pool: g.pool, Stream: g.stream}
			by[k] = p
		}
		p.ReservedBytes += g.size
		var free, run int64
		used := false
		var prevEnd int64 = -1
		for _, pc := range g.pieces {
			if pc.free {
				free += pc.size
				if prevEnd != pc.addr {
					run = 0
				}
				run += pc.size
				p.LargestFreeBlock = max(p.LargestFreeBlock, run)
			} else {
				used = true
				run = 0
				p.AllocatedBytes += pc.size
			}
			prevEnd = pc.addr + pc.size
		}
		p.FreeBytes += free
		if used {
			p.SplitFreeBytes += free
		}
	}
	for _, p := range by {
		st.Pools = append(st.Pools, *p)
		st.ReservedBytes += p.ReservedBytes
		st.AllocatedBytes += p.AllocatedBytes
		st.FreeBytes += p.FreeBytes
		st.SplitFreeBytes += p.SplitFreeBytes
	}
	slices.SortFunc(st.Pools, func(a, b PoolState) int {
		return cmp.Or(cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Pool, b.Pool))
	})
	return st
}
