package frag

// Fragmentation from an allocator snapshot, by pool and stream: the
// snapshot lists every segment (small or large pool, its stream) with its
// blocks, so free space split inside segments that still hold live blocks
// (torch's inactive_split_bytes) is known exactly where a trace can only
// bound it. A free block serves only requests of its own pool and stream.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
)

// snapshotSplitMinBytes: split free space under this is not worth a
// warning whatever its share (a small cache after an OOM flush), the same
// floor as the trace's reserved-gap signal.
const snapshotSplitMinBytes = 64 << 20

// SnapshotPool is one pool of one stream in a snapshot.
type SnapshotPool struct {
	Device   int    `json:"device"`
	Pool     string `json:"pool"` // "small" or "large"
	Stream   int64  `json:"stream"`
	Segments int    `json:"segments"`
	// Expandable counts expandable segments (one per pool and stream that
	// grows in place).
	Expandable     int   `json:"expandable_segments"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	AllocatedBytes int64 `json:"allocated_bytes"`
	// InactiveSplitBytes is free space in segments that also hold live
	// blocks: neither empty_cache() can return it nor a request larger than
	// its pieces use it. LargestFreeBlock is the largest free piece.
	InactiveSplitBytes int64 `json:"inactive_split_bytes"`
	LargestFreeBlock   int64 `json:"largest_free_block"`
}

// SnapshotReport is the snapshot's fragmentation verdict.
type SnapshotReport struct {
	Verdict            string         `json:"verdict"`
	Reason             string         `json:"reason"`
	ReservedBytes      int64          `json:"reserved_bytes"`
	InactiveSplitBytes int64          `json:"inactive_split_bytes"`
	Fraction           float64        `json:"fraction"`
	Pools              []SnapshotPool `json:"pools"`
}

// SnapshotPools sums the snapshot's segments per device, pool and stream,
// most split first.
func SnapshotPools(rep *snapshot.Report) []SnapshotPool {
	type key struct {
		dev    int
		pool   string
		stream int64
	}
	by := map[key]*SnapshotPool{}
	for _, s := range rep.SegmentFills {
		k := key{s.Device, s.SegmentType, s.Stream}
		p := by[k]
		if p == nil {
			p = &SnapshotPool{Device: s.Device, Pool: s.SegmentType, Stream: s.Stream}
			by[k] = p
		}
		p.Segments++
		if s.Expandable {
			p.Expandable++
		}
		p.ReservedBytes += s.TotalSize
		p.AllocatedBytes += s.AllocatedBytes
		if s.ActiveBytes > 0 && !s.Expandable { // torch: expandable pages are never split waste
			p.InactiveSplitBytes += s.FreeBytes
		}
		p.LargestFreeBlock = max(p.LargestFreeBlock, s.LargestFreeBlock)
	}
	out := make([]SnapshotPool, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b SnapshotPool) int {
		return cmp.Or(cmp.Compare(b.InactiveSplitBytes, a.InactiveSplitBytes), cmp.Compare(a.Device, b.Device), strings.Compare(a.Pool, b.Pool), cmp.Compare(a.Stream, b.Stream))
	})
	return out
}

// JudgeSnapshot: fragmented when split free space is over the
// fraction of reserved and at least 64 MiB.
func JudgeSnapshot(rep *snapshot.Report, fraction float64) SnapshotReport {
	st := rep.Stats
	out := SnapshotReport{Verdict: VerdictOK, ReservedBytes: st.ReservedBytes, InactiveSplitBytes: st.InactiveSplitBytes, Pools: SnapshotPools(rep)}
	if st.ReservedBytes > 0 {
		out.Fraction = float64(st.InactiveSplitBytes) / float64(st.ReservedBytes)
	}
	var parts []string
	for _, p := range out.Pools {
		if p.InactiveSplitBytes > 0 && len(parts) < 4 {
			parts = append(parts, fmt.Sprintf("%s in the %s pool of stream %d (largest free piece %s)", memtimeline.FormatBytes(p.InactiveSplitBytes), p.Pool, p.Stream, memtimeline.FormatBytes(p.LargestFreeBlock)))
		}
	}
	where := ""
	if len(parts) > 0 {
		where = ": " + strings.Join(parts, ", ")
	}
	if out.Fraction > fraction && st.InactiveSplitBytes >= snapshotSplitMinBytes {
		out.Verdict = VerdictFragmented
		out.Reason = fmt.Sprintf("the cache wastes memory: %s (%.0f%% of %s reserved, over %.0f%%) is free but split inside segments that also hold live blocks%s",
			memtimeline.FormatBytes(st.InactiveSplitBytes), 100*out.Fraction, memtimeline.FormatBytes(st.ReservedBytes), 100*fraction, where)
		return out
	}
	out.Reason = fmt.Sprintf("%s (%.0f%% of %s reserved) is free but split inside used segments%s; fragmented needs over %.0f%% and at least %s",
		memtimeline.FormatBytes(st.InactiveSplitBytes), 100*out.Fraction, memtimeline.FormatBytes(st.ReservedBytes), where, 100*fraction, memtimeline.FormatBytes(snapshotSplitMinBytes))
	return out
}
