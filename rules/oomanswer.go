package rules

import (
	"fmt"
	"math"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/site"
)

// OOMAnswer is one out-of-memory with the allocator's state around it.
type OOMAnswer struct {
	Source       string `json:"source"`
	RequestBytes int64  `json:"request_bytes"`
	// AllocatedBytes and ReservedBytes are the totals at the failure (from
	// a trace) or at the snapshot's dump; -1 when unknown.
	AllocatedBytes int64 `json:"allocated_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	// FreeInCacheBytes is reserved minus allocated; LargestFreeBlock the
	// largest free block in the cache (snapshot only); DeviceFreeBytes what
	// the driver had left; CapacityBytes the GPU's memory. -1 when unknown.
	FreeInCacheBytes int64 `json:"free_in_cache_bytes"`
	LargestFreeBlock int64 `json:"largest_free_block"`
	DeviceFreeBytes  int64 `json:"device_free_bytes"`
	CapacityBytes    int64 `json:"capacity_bytes"`
	// AtFailure: the allocated, reserved and free figures are the
	// allocator's when the request failed (a trace's OOM event, or a
	// snapshot's segments with the history after the OOM undone); false
	// when they are a later dump's. StateNote says why they are not.
	AtFailure bool   `json:"at_failure"`
	StateNote string `json:"state_note,omitempty"`
	// Pool is the pool the request is served from ("small" up to 1 MiB,
	// "large"); PoolFreeBytes and PoolLargestFreeBlock that pool's free
	// bytes and largest free run on the request's stream at the failure,
	// -1 when unknown. SplitFreeBytes: free bytes inside segments that
	// also hold live blocks (the allocator's retry cannot give them back).
	Pool                 string `json:"pool,omitempty"`
	PoolFreeBytes        int64  `json:"pool_free_bytes"`
	PoolLargestFreeBlock int64  `json:"pool_largest_free_block"`
	SplitFreeBytes       int64  `json:"split_free_bytes"`
	// Cause is "capacity" (the memory was not there), "process_limit"
	// (the process's memory fraction refused it), "fragmentation" (the
	// cache held enough free bytes at the failure, none in one piece
	// the request could use) or "unknown".
	Cause string `json:"cause"`
	// FilledBy names the leak that filled the memory, when the run leaks
	// and the OOM is not fragmentation (the chain: leak, then OOM).
	FilledBy string         `json:"filled_by,omitempty"`
	Reason   string         `json:"reason"`
	Location *site.Location `json:"location,omitempty"`
	// Composition is what was alive when it failed (traces only).
	Composition *memtimeline.Composition `json:"composition,omitempty"`
}

// OOM causes.
const (
	OOMCapacity      = "capacity"
	OOMFragmentation = "fragmentation"
	// OOMProcessLimit: the device had the bytes, the process's own cap
	// (torch.cuda.set_per_process_memory_fraction) refused them.
	OOMProcessLimit = "process_limit"
	// OOMCauseUnknown: the allocator's state at the failure not recorded.
	OOMCauseUnknown = "unknown"
)

// OOMFacts are what one input records about out-of-memory errors, before
// they are judged together with the other inputs of the run and rank (a
// summary keeps them so that the merge below happens at the reduce).
type OOMFacts struct {
	// CapacityBytes is the largest GPU memory a trace names (-1 none).
	CapacityBytes int64 `json:"capacity_bytes"`
	// TraceOOMs are a trace's OOM events, unjudged (Cause empty); the
	// first carries what was alive.
	TraceOOMs []OOMAnswer `json:"trace_ooms,omitempty"`
	// SnapshotStats are a snapshot's totals; SnapshotOOMs its OOM records.
	SnapshotStats *snapshot.Stats `json:"snapshot_stats,omitempty"`
	SnapshotOOMs  []SnapshotOOM   `json:"snapshot_ooms,omitempty"`
}

// SnapshotOOM is an allocator snapshot's record of one failed request.
type SnapshotOOM struct {
	RequestBytes    int64          `json:"request_bytes"`
	DeviceFreeBytes int64          `json:"device_free_bytes"`
	Stream          int64          `json:"stream"`
	Location        *site.Location `json:"location,omitempty"`
	// State is the allocator when the request failed, rebuilt from the
	// dump and the history after the OOM entry.
	State *snapshot.OOMState `json:"state,omitempty"`
}

// OOMFacts are the input's out-of-memory records (memoized).
func (in *Input) OOMFacts() OOMFacts {
	if in.IsDigest() {
		if in.Digest.OOMFacts != nil {
			return *in.Digest.OOMFacts
		}
		return OOMFacts{CapacityBytes: -1}
	}
	return Memo(in, "verdict:oom-facts", func() OOMFacts {
		f := OOMFacts{CapacityBytes: -1}
		switch in.InputKind() {
		case SourceTrace:
			for _, d := range in.Trace.Meta.Devices {
				f.CapacityBytes = max(f.CapacityBytes, d.TotalGlobalMem)
			}
			for i, o := range in.Trace.OOMs {
				a := OOMAnswer{Source: in.Source, RequestBytes: o.Bytes, AllocatedBytes: o.TotalAllocated, ReservedBytes: o.TotalReserved,
					FreeInCacheBytes: max(0, o.TotalReserved-o.TotalAllocated), LargestFreeBlock: -1, DeviceFreeBytes: -1, CapacityBytes: -1}
				if i == 0 {
					a.Composition = in.oomComposition()
				}
				f.TraceOOMs = append(f.TraceOOMs, a)
			}
		case SourceSnapshot:
			rep := in.SnapshotReport()
			st := rep.Stats
			f.SnapshotStats = &st
			for _, o := range rep.OOMs {
				st := o.State
				so := SnapshotOOM{RequestBytes: o.RequestedBytes, DeviceFreeBytes: o.DeviceFreeBytes, Stream: o.Stream, State: &st}
				if o.Site.Filename != "" {
					so.Location = &site.Location{File: o.Site.Filename, Line: o.Site.Line, Function: o.Site.Name}
				}
				f.SnapshotOOMs = append(f.SnapshotOOMs, so)
			}
		}
		return f
	})
}

// judgeOOMs collects the out-of-memory errors of the group, merging a
// trace's event with the snapshot's record of the same request: one OOM
// is one error, whichever files recorded it.
func judgeOOMs(ins []*Input) []OOMAnswer {
	var out []OOMAnswer
	var capacity int64 = -1
	facts := make([]OOMFacts, len(ins))
	for i, in := range ins {
		facts[i] = in.OOMFacts()
		capacity = max(capacity, facts[i].CapacityBytes)
	}
	for _, f := range facts {
		for _, a := range f.TraceOOMs {
			a.CapacityBytes, a.AtFailure = capacity, true // the event carries the totals at the failure
			a.PoolFreeBytes, a.PoolLargestFreeBlock, a.SplitFreeBytes = -1, -1, -1
			a.Pool = snapshot.PoolOf(a.RequestBytes)
			out = append(out, a)
		}
	}
	for i, f := range facts {
		for _, o := range f.SnapshotOOMs {
			merged := false
			for j := range out {
				if out[j].RequestBytes == o.RequestBytes && out[j].DeviceFreeBytes < 0 {
					out[j].DeviceFreeBytes, out[j].Location = o.DeviceFreeBytes, o.Location
					addSnapshotState(&out[j], o, false)
					merged = true
					break
				}
			}
			if merged {
				continue
			}
			a := OOMAnswer{Source: ins[i].Source, RequestBytes: o.RequestBytes, AllocatedBytes: -1, ReservedBytes: -1, FreeInCacheBytes: -1,
				LargestFreeBlock: -1, DeviceFreeBytes: o.DeviceFreeBytes, CapacityBytes: capacity, Location: o.Location,
				Pool: snapshot.PoolOf(o.RequestBytes), PoolFreeBytes: -1, PoolLargestFreeBlock: -1, SplitFreeBytes: -1}
			addSnapshotState(&a, o, true)
			out = append(out, a)
		}
	}
	for i := range out {
		out[i].Cause, out[i].Reason = oomCause(out[i])
	}
	return out
}

// addSnapshotState fills an OOM's figures from the snapshot's segments
// as they were at the failure; totals only when the OOM has none yet
// (a trace's event already carries them).
func addSnapshotState(a *OOMAnswer, o SnapshotOOM, totals bool) {
	st := o.State
	if st == nil || !st.Exact {
		if st != nil && !a.AtFailure {
			a.StateNote = "the snapshot was dumped after the error and its history cannot rebuild the segments at the failure (" + st.Note + "): the cache's free bytes then are not known"
		}
		return
	}
	p := st.Pool(a.Pool, o.Stream)
	a.PoolFreeBytes, a.PoolLargestFreeBlock, a.SplitFreeBytes = p.FreeBytes, p.LargestFreeBlock, st.SplitFreeBytes
	for _, q := range st.Pools {
		a.LargestFreeBlock = max(a.LargestFreeBlock, q.LargestFreeBlock)
	}
	if totals || !a.AtFailure {
		a.AllocatedBytes, a.ReservedBytes, a.FreeInCacheBytes = st.AllocatedBytes, st.ReservedBytes, st.FreeBytes
		a.AtFailure = true
	}
	if !st.AtDump {
		a.StateNote = fmt.Sprintf("the snapshot was dumped after the error; its segments at the failure are rebuilt by undoing the %d allocator events recorded after it", st.Undone)
	}
}

// oomCause says why a request failed, from the allocator at the failure.
// torch's caching allocator fails a request only after it found no free
// block of the request's pool and stream large enough, could not get a
// new segment (the device, or the process's memory fraction, refused
// it), and gave back every cached segment with no live block in it and
// tried again. What free memory is left in the cache then sits in
// segments that also hold live blocks. So: when those free bytes could
// hold the request, the memory was there but split (fragmentation);
// when they could not (a rounding error of the request), it was
// capacity: the device's, or the process limit's when the device still
// had the bytes.
func oomCause(a OOMAnswer) (string, string) {
	req := a.RequestBytes
	mb := memtimeline.FormatBytes
	if a.CapacityBytes > 0 && req > a.CapacityBytes {
		return OOMCapacity, fmt.Sprintf("the request alone is larger than the GPU's %s", mb(a.CapacityBytes))
	}
	known := a.AtFailure && a.FreeInCacheBytes >= 0
	if known && a.PoolLargestFreeBlock >= req {
		// The allocator would have used that block: the figures are not
		// the failure's.
		known = false
	}
	share := ""
	if known && req > 0 {
		share = fmt.Sprintf("; the %s free in the cache at the failure is %s of the request, not enough whatever its layout, so this is not fragmentation", mb(a.FreeInCacheBytes), pct(a.FreeInCacheBytes, req))
	}
	switch {
	case known && a.FreeInCacheBytes >= req:
		s := fmt.Sprintf("the cache held %s free at the failure, enough for the %s request, but not in a piece the request could use", mb(a.FreeInCacheBytes), mb(req))
		if a.PoolFreeBytes >= 0 {
			s += fmt.Sprintf(": %s in the %s pool the request is served from (largest piece %s)", mb(a.PoolFreeBytes), a.Pool, mb(a.PoolLargestFreeBlock))
			if other := a.FreeInCacheBytes - a.PoolFreeBytes; other > 0 {
				s += fmt.Sprintf(", %s in the other pool's segments", mb(other))
			}
		}
		s += "; the free bytes sit in segments that also hold live blocks, so the allocator's retry could not give them back; " + frag.AdviceSplitFree
		return OOMFragmentation, s
	case a.DeviceFreeBytes >= req && a.ReservedBytes >= 0:
		// The driver had the bytes and the cache had not: the process's
		// own cap refused a new segment. torch fails when reserved plus
		// the new segment passes the cap, so the cap lies in [reserved,
		// reserved + request); the files do not record it exactly.
		lim := fmt.Sprintf("between %s and %s", mb(a.ReservedBytes), mb(a.ReservedBytes+req))
		if a.CapacityBytes > 0 {
			lim += fmt.Sprintf(" (%.1f%%-%.1f%% of the GPU's %s)", 100*float64(a.ReservedBytes)/float64(a.CapacityBytes), 100*float64(a.ReservedBytes+req)/float64(a.CapacityBytes), mb(a.CapacityBytes))
		}
		return OOMProcessLimit, fmt.Sprintf("the device had %s free, but the process is capped: torch.cuda.set_per_process_memory_fraction (or a framework setting it) limits this process to %s, and %s reserved plus the %s requested passed it; the OOM message says the cap (\"... allowed\")%s; raise the fraction, or lower the peak under it", mb(a.DeviceFreeBytes), lim, mb(a.ReservedBytes), mb(req), share)
	case a.DeviceFreeBytes >= req:
		return OOMProcessLimit, "the device had " + mb(a.DeviceFreeBytes) + " free, so the process's own limit (torch.cuda.set_per_process_memory_fraction) refused a new segment; " + a.StateNote
	case a.AllocatedBytes >= 0 && a.CapacityBytes > 0:
		return OOMCapacity, fmt.Sprintf("%s allocated of %s: the memory was in use%s; lower the peak (batch size, activation checkpointing, mixed precision)", mb(a.AllocatedBytes), mb(a.CapacityBytes), share)
	case known && a.DeviceFreeBytes >= 0:
		return OOMCapacity, fmt.Sprintf("free on the device %s plus free in the cache %s is less than the request", mb(a.DeviceFreeBytes), mb(a.FreeInCacheBytes))
	}
	return OOMCauseUnknown, "the allocator's state at the failure was not recorded"
}

// pct is a as a percentage of b, in words ("2%", "under 1%").
func pct(a, b int64) string {
	if b <= 0 {
		return "?"
	}
	f := 100 * float64(a) / float64(b)
	if f < 1 {
		return "under 1%"
	}
	return fmt.Sprintf("%.0f%%", math.Floor(f)) // 99.6% of a request is not all of it
}

// oomComposition is what was alive at the trace's first out-of-memory.
func (in *Input) oomComposition() *memtimeline.Composition {
	return Memo(in, "verdict:oom-composition", func() *memtimeline.Composition {
		if !in.Has(SourceTrace) || len(in.Trace.OOMs) == 0 {
			return nil
		}
		o := in.Trace.OOMs[0]
		return memtimeline.CompositionAt(in.Trace, in.Attribution(), in.Lifetimes(-1), int(o.DeviceID), o.TS)
	})
}
