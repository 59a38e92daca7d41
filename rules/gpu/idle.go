package gpu

// Why the GPU idles: a gap in the device's work is charged to a cause only
// when the trace shows one. The host fetching the next batch (a DataLoader
// range over the gap) is input starvation; a gap that opens while the host
// waits in a synchronize or a pageable copy (the GPU drained its queue
// because the host stopped launching) is the sync's or the copy's. Idle
// time with none of these is the host launching work slower than the GPU
// runs it: launch or CPU bound, an observation rather than a defect.

import (
	"cmp"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
)

// idleWaitSlack is how long after a host wait returns a gap may open and
// still be the wait's: the device finishes, then the host call returns.
const idleWaitSlack = 50_000 // ns

type waitKind uint8

const (
	waitSync waitKind = iota
	waitPageable
)

type hostWait struct {
	start, end int64
	kind       waitKind
}

// IdleIndex holds the host ranges idle time can be charged to.
type IdleIndex struct {
	data  []Interval // DataLoader fetches, merged
	waits []hostWait // sorted by start
	// maxWait is the longest wait, bounding the search back from a gap.
	maxWait int64
}

// isDataLoaderRange names the profiler's annotation of a DataLoader fetch
// ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__").
func isDataLoaderRange(name string) bool { return strings.HasPrefix(name, "enumerate(DataLoader)#") }

// isSyncCall names the CUDA runtime calls in which the host waits for the
// device: synchronizes (torch.cuda.synchronize, .item(), .cpu(), events)
// and synchronous copies.
func isSyncCall(name string) bool {
	return strings.Contains(name, "Synchronize") ||
		(strings.HasPrefix(name, "cudaMemcpy") && !strings.Contains(name, "Async"))
}

// NewIdleIndex collects the host ranges idle time can be charged to: data
// loading, synchronizes and the pageable uploads among copies.
func NewIdleIndex(t *chrometrace.Trace, copies []HostCopy) *IdleIndex {
	ix := &IdleIndex{}
	for i := range t.HostOps {
		h := &t.HostOps[i]
		switch {
		case h.Cat == chrometrace.CatCUDARuntime && isSyncCall(t.Str(h.Name)):
			ix.waits = append(ix.waits, hostWait{h.Start, h.End(), waitSync})
		case (h.Cat == chrometrace.CatUserAnnotation || h.Cat == chrometrace.CatCPUOp) && isDataLoaderRange(t.Str(h.Name)):
			ix.data = append(ix.data, Interval{h.Start, h.End()})
		}
	}
	for _, c := range copies {
		if c.Dir == H2D && c.Pageable && c.Blocked > 0 {
			ix.waits = append(ix.waits, hostWait{c.Launch, c.Launch + c.Blocked, waitPageable})
		}
	}
	slices.SortFunc(ix.waits, func(a, b hostWait) int { return cmp.Compare(a.start, b.start) })
	for _, w := range ix.waits {
		ix.maxWait = max(ix.maxWait, w.end-w.start)
	}
	slices.SortFunc(ix.data, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	merged := ix.data[:0]
	for _, iv := range ix.data {
		if n := len(merged); n > 0 && iv.Start <= merged[n-1].End {
			merged[n-1].End = max(merged[n-1].End, iv.End)
			continue
		}
		merged = append(merged, iv)
	}
	ix.data = merged
	return ix
}

// dataOverlap is how much of [s, e) the host spent fetching data.
func (ix *IdleIndex) dataOverlap(s, e int64) int64 {
	k, _ := slices.BinarySearchFunc(ix.data, s, func(iv Interval, t int64) int { return cmp.Compare(iv.End, t) })
	var n int64
	for ; k < len(ix.data) && ix.data[k].Start < e; k++ {
		n += max(0, min(e, ix.data[k].End)-max(s, ix.data[k].Start))
	}
	return n
}

// openedBy returns the host wait a gap starting at s opened in: the host
// entered it while the device was still busy and the device ran dry
// before (or just as) it returned.
func (ix *IdleIndex) openedBy(s int64) (waitKind, bool) {
	k, _ := slices.BinarySearchFunc(ix.waits, s, func(w hostWait, t int64) int { return cmp.Compare(w.start, t+1) })
	for j := k - 1; j >= 0 && s-ix.waits[j].start <= ix.maxWait+idleWaitSlack; j-- {
		w := ix.waits[j]
		if w.start <= s && s <= w.end+idleWaitSlack {
			return w.kind, true
		}
	}
	return 0, false
}

// Causes is one step's idle time charged to its causes (ns).
type Causes struct {
	Data, Sync, Pageable int64
}

// Named is the idle time charged to some cause.
func (c Causes) Named() int64 { return c.Data + c.Sync + c.Pageable }

// CausesInWindow charges each idle gap of one step: the part the host
// spent fetching data to input starvation; the rest, when the gap opened
// in a host wait, to that wait.
func CausesInWindow(busy []Interval, w Window, ix *IdleIndex) Causes {
	var c Causes
	k, _ := slices.BinarySearchFunc(busy, w.Start, func(iv Interval, t int64) int { return cmp.Compare(iv.End, t) })
	cursor := w.Start
	// A gap running into the step opened where the device's last work
	// before the step ended.
	opened := int64(-1)
	if k > 0 {
		opened = busy[k-1].End
	}
	charge := func(s, e int64) {
		if e <= s {
			return
		}
		d := ix.dataOverlap(s, e)
		c.Data += d
		if s == w.Start {
			s = opened
		}
		if kind, ok := ix.openedBy(s); ok && s >= 0 {
			if kind == waitPageable {
				c.Pageable += e - max(s, w.Start) - d
			} else {
				c.Sync += e - max(s, w.Start) - d
			}
		}
	}
	for ; k < len(busy) && busy[k].Start < w.End; k++ {
		s := max(busy[k].Start, w.Start)
		charge(cursor, s)
		cursor = max(cursor, min(busy[k].End, w.End))
	}
	charge(cursor, w.End)
	return c
}
