package frag

// The caching allocator's pools, followed from a trace's [memory] events.
//
// Requests of at most 1 MiB are served from the small pool (2 MiB
// segments), larger ones from the large pool; a free block of one pool
// never serves the other. A trace records every block's size and address
// and the reserved total after each event, so the segments the allocator
// creates inside the window are known (a reserved rise on an allocation is
// a new segment, or with expandable_segments a mapping grown in place,
// holding that block), and so is every block inside them. Segments made
// before the window are not: their idle bytes per pool are bounded from
// below by the frees and allocations seen there (idle never goes negative).
//
// A new segment counts against the cache only when the same pool already
// held at least the requested bytes idle in segments big enough for the
// request: memory the cache had but not in one piece. Idle large-pool
// blocks do not make a small request a miss, nor do idle bytes in segments
// smaller than the request (made for smaller tensors) make a large one.

import (
	"cmp"
	"slices"
)

// Pools of the CUDA caching allocator.
const (
	PoolSmall = "small"
	PoolLarge = "large"
)

// smallPoolMax is the largest request the small pool serves (kSmallSize).
const smallPoolMax = 1 << 20

func poolOf(bytes int64) int {
	if bytes <= smallPoolMax {
		return 0
	}
	return 1
}

var poolNames = [2]string{PoolSmall, PoolLarge}

type poolSegment struct {
	base, end uint64
	pool      int
	live      int   // blocks allocated inside it and alive
	liveBytes int64 // their bytes
}

type poolBlock struct {
	size    int64
	pool    int
	segment bool // inside a segment created in the window
}

// poolSim follows one device's pools through the window.
type poolSim struct {
	segs  []poolSegment // disjoint, sorted by base
	live  map[uint64]poolBlock
	known [2]int64 // idle bytes in segments created in the window
	// pre and preMin: change of idle bytes in earlier segments, and its
	// running minimum (their idle at the start is at least -preMin).
	pre, preMin [2]int64
}

func newPoolSim() *poolSim { return &poolSim{live: map[uint64]poolBlock{}} }

// idle is the least the pool can have held idle at this point.
func (s *poolSim) idle(pool int) int64 { return s.known[pool] + s.pre[pool] - s.preMin[pool] }

// idleFor is the least idle memory of the request's pool in segments big
// enough to hold it: a block never spans segments, so idle bytes in smaller
// segments (an earlier, smaller batch's) could not serve it whatever their
// layout. Only segments made in the window have a known size.
func (s *poolSim) idleFor(bytes int64) int64 {
	pool := poolOf(bytes)
	var n int64
	for _, g := range s.segs {
		if g.pool == pool && int64(g.end-g.base) >= bytes {
			n += int64(g.end-g.base) - g.liveBytes
		}
	}
	return n
}

func (s *poolSim) find(addr uint64) int {
	k, _ := slices.BinarySearchFunc(s.segs, addr, func(g poolSegment, a uint64) int {
		switch {
		case g.end <= a:
			return -1
		case g.base > a:
			return 1
		}
		return 0
	})
	if k < len(s.segs) && s.segs[k].base <= addr && addr < s.segs[k].end {
		return k
	}
	return -1
}

func (s *poolSim) preChange(pool int, d int64) {
	s.pre[pool] += d
	s.preMin[pool] = min(s.preMin[pool], s.pre[pool])
}

// grow records a segment of grown bytes made for the block at addr; with
// expandable segments the mapping may continue a segment already known.
func (s *poolSim) grow(addr uint64, bytes, grown int64) {
	pool := poolOf(bytes)
	seg := poolSegment{base: addr, end: addr + uint64(max(grown, bytes)), pool: pool}
	// Merge with segments it overlaps: an expandable segment mapping more
	// pages for a block that starts in its free tail. Separate cudaMalloc
	// segments may lie next to each other but never overlap, and a block
	// never spans two of them, so adjacency alone does not merge.
	k, _ := slices.BinarySearchFunc(s.segs, seg.base, func(g poolSegment, a uint64) int { return cmp.Compare(g.base, a) })
	lo, hi := k, k
	for lo > 0 && s.segs[lo-1].end > seg.base {
		lo--
	}
	for hi < len(s.segs) && s.segs[hi].base < seg.end {
		hi++
	}
	added := int64(seg.end - seg.base)
	for _, g := range s.segs[lo:hi] {
		added -= int64(min(g.end, seg.end) - max(g.base, seg.base))
		seg.base, seg.end = min(seg.base, g.base), max(seg.end, g.end)
		seg.live += g.live
		seg.liveBytes += g.liveBytes
	}
	s.segs = slices.Replace(s.segs, lo, hi, seg)
	s.known[pool] += max(added, 0)
}

// inUsedSegment reports whether addr lies in a window segment that holds
// live blocks: a block there was carved from it, not from a new segment.
func (s *poolSim) inUsedSegment(addr uint64) bool {
	k := s.find(addr)
	return k >= 0 && s.segs[k].live > 0
}

// Segment sizes of the caching allocator (get_allocation_size): a small
// request gets a 2 MiB segment, a large one under 10 MiB a 20 MiB segment,
// a larger one its size rounded up to 2 MiB.
const (
	smallSegment = 2 << 20
	minLargeSize = 10 << 20
	largeSegment = 20 << 20
	roundLarge   = 2 << 20
)

func segmentSize(request int64) int64 {
	switch {
	case request <= smallPoolMax:
		return smallSegment
	case request < minLargeSize:
		return largeSegment
	}
	return (request + roundLarge - 1) / roundLarge * roundLarge
}

func (s *poolSim) alloc(addr uint64, bytes int64) {
	pool := poolOf(bytes)
	b := poolBlock{size: bytes, pool: pool}
	if k := s.find(addr); k >= 0 {
		b.segment = true
		s.segs[k].live++
		s.segs[k].liveBytes += bytes
		s.known[pool] -= bytes
	} else {
		s.preChange(pool, -bytes)
	}
	s.live[addr] = b
}

func (s *poolSim) free(addr uint64, bytes int64) {
	b, ok := s.live[addr]
	if !ok {
		// Allocated before the window, in a segment from before it.
		s.preChange(poolOf(bytes), bytes)
		return
	}
	delete(s.live, addr)
	if b.segment {
		if k := s.find(addr); k >= 0 {
			s.segs[k].live--
			s.segs[k].liveBytes -= b.size
		}
		s.known[b.pool] += b.size
		return
	}
	s.preChange(b.pool, b.size)
}

// release drops bytes of segments given back to the driver: fully free
// ones made in the window first, the rest from earlier segments (of an
// unknown pool, so both pools' bounds drop). When the bytes cover every
// fully free segment, all of them went: the allocator's free-and-retry and
// empty_cache() give back every unused segment of both pools
// (release_cached_blocks).
func (s *poolSim) release(bytes int64) {
	var free int64
	for _, g := range s.segs {
		if g.live == 0 {
			free += int64(g.end - g.base)
		}
	}
	if free > 0 && bytes >= free {
		kept := s.segs[:0]
		for _, g := range s.segs {
			if g.live == 0 {
				s.known[g.pool] -= int64(g.end - g.base)
				continue
			}
			kept = append(kept, g)
		}
		s.segs = kept
		bytes -= free
	}
	for k := len(s.segs) - 1; k >= 0 && bytes > 0; k-- {
		g := s.segs[k]
		if g.live > 0 || int64(g.end-g.base) > bytes {
			continue
		}
		bytes -= int64(g.end - g.base)
		s.known[g.pool] -= int64(g.end - g.base)
		s.segs = slices.Delete(s.segs, k, k+1)
	}
	if bytes > 0 {
		for p := range 2 {
			s.preChange(p, -min(bytes, s.pre[p]-s.preMin[p]))
		}
	}
}

// FragmentedMiss is one new segment the same pool could have done without
// had its idle bytes been in one piece.
type FragmentedMiss struct {
	TS   int64  `json:"ts_ns"`
	Step string `json:"step"`
	Pool string `json:"pool"`
	// RequestBytes is the block asked for, GrownBytes the reserved it added,
	// PoolIdleBytes the least the same pool held idle just before.
	RequestBytes  int64 `json:"request_bytes"`
	GrownBytes    int64 `json:"grown_bytes"`
	PoolIdleBytes int64 `json:"pool_idle_bytes"`
}

// PoolUse is one pool at the end of the window as the trace shows it.
type PoolUse struct {
	Pool string `json:"pool"`
	// SegmentBytes are the segments made in the window and still held;
	// IdleAtLeastBytes the least idle bytes the pool held at the end.
	SegmentBytes     int64 `json:"window_segment_bytes"`
	IdleAtLeastBytes int64 `json:"idle_at_least_bytes"`
	// InactiveSplitBytes is free space inside those segments that also
	// hold live blocks (torch's inactive_split_bytes, for them only).
	InactiveSplitBytes int64 `json:"inactive_split_bytes"`
	Misses             int64 `json:"fragmented_misses"`
	MissBytes          int64 `json:"fragmented_miss_bytes"`
}

func (s *poolSim) use() []PoolUse {
	out := make([]PoolUse, 2)
	for p := range 2 {
		out[p].Pool = poolNames[p]
		out[p].IdleAtLeastBytes = s.idle(p)
	}
	for _, g := range s.segs {
		out[g.pool].SegmentBytes += int64(g.end - g.base)
		if g.live > 0 {
			out[g.pool].InactiveSplitBytes += int64(g.end-g.base) - g.liveBytes
		}
	}
	return out
}
