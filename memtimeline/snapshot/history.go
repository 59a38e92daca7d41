package snapshot

import (
	"fmt"
	"iter"
	"math"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/internal/hugepages"
)

// Trace is one device's recorded history, its entries in time order. The
// entries are stored compact (32 bytes each, no pointers: an action,
// stream, context and stack are ids into tables the whole snapshot
// shares) and read as TraceEntry values, made on each read. A 1 GB
// snapshot's 7.2M entries took 634 MB as []TraceEntry, faulted in and
// zeroed by the kernel and scanned by every collection after; as Trace
// they take 230 MB that no collection scans, and the decoder writes them
// in place, so that the entries are never copied. The zero Trace is
// empty. A Trace is read-only and safe for concurrent reads.
type Trace struct {
	h        *history
	first, n int
}

// Len is the number of entries.
func (t Trace) Len() int { return t.n }

// At returns entry i (0 <= i < Len).
func (t Trace) At(i int) TraceEntry {
	if i < 0 || i >= t.n {
		panic(fmt.Sprintf("snapshot: trace entry %d of %d", i, t.n))
	}
	return t.h.expand(t.h.at(t.first + i))
}

// All yields the entries in order with their indices.
func (t Trace) All() iter.Seq2[int, TraceEntry] {
	return func(yield func(int, TraceEntry) bool) {
		for i := 0; i < t.n; {
			c := t.h.chunks[(t.first+i)>>histChunkBits]
			off := (t.first + i) & histChunkMask
			run := c[off:min(len(c), off+t.n-i)]
			for k := range run {
				if !yield(i, t.h.expand(&run[k])) {
					return
				}
				i++
			}
		}
	}
}

// Entries returns the entries as a slice (a copy).
func (t Trace) Entries() []TraceEntry {
	out := make([]TraceEntry, 0, t.n)
	for _, e := range t.All() {
		out = append(out, e)
	}
	return out
}

// NewTrace stores entries as a Trace (frames and contexts are kept as
// given, shared where the entries share them).
func NewTrace(entries []TraceEntry) Trace {
	b := newHistoryBuilder(&history{})
	return b.trace(entries)
}

// maxHistoryEntries caps the entries of one snapshot's history, every
// device's trace together: a replay keys a trace's entries by index in an
// AddrMap (32 bits) and a record's id is 31 bits (the pickle decoder's
// refRecord). A real snapshot has far fewer (the 1 GB bench input 7.2M);
// more is a property of the file (a pickle over about 8 GiB could say it),
// refused as a *chrometrace.CountLimitError before any entry past the cap
// is stored. A variable so that tests can lower it.
var maxHistoryEntries = math.MaxInt32

// historyTooLong is the error for a history past maxHistoryEntries:
// device_traces[dev] has n entries to store after the before ones stored
// (the records, the traces before it), or (dev < 0) the decoder's
// records alone are too many.
func historyTooLong(dev, n, before int) error {
	err := &chrometrace.CountLimitError{What: "trace entries in one snapshot's device_traces (all devices together; entries are indexed by 32-bit ints)", Limit: int64(maxHistoryEntries)}
	if dev < 0 {
		return err
	}
	return fmt.Errorf("device_traces[%d] has %d entries, with %d stored before them: %w", dev, n, before, err)
}

// history holds the entries of a snapshot's traces, every device's, in
// chunks of histChunk entries (the first grows up to that), and the
// tables their ids index.
type history struct {
	chunks [][]entry
	n      int
	metas  []entryMeta
	stacks [][]Frame // stacks[id-1]
}

// entry is a TraceEntry stored: the three fields that differ from entry
// to entry, and ids of the rest (meta: metas[meta]; stack: stacks[stack-1],
// 0 for none).
type entry struct {
	addr        uint64
	size        int64
	timeUS      int64
	meta, stack uint32
}

// entryMeta is what entries share: few per history (an action on a
// stream in a context).
type entryMeta struct {
	action     string
	stream     int64
	deviceFree int64 // on oom entries only
	context    *EntryContext
	// nkeys is the number of keys of the entry's dict, for the mapper's
	// budget (the work an entry stands for, see work).
	nkeys int
}

const (
	histChunkBits = 19 // 512Ki entries of 32 bytes: 16 MiB, huge pages inside
	histChunk     = 1 << histChunkBits
	histChunkMask = histChunk - 1
)

func (h *history) at(i int) *entry { return &h.chunks[i>>histChunkBits][i&histChunkMask] }

func (h *history) expand(e *entry) TraceEntry {
	m := &h.metas[e.meta]
	t := TraceEntry{Action: m.action, Addr: e.addr, DeviceFree: m.deviceFree, Size: e.size, Stream: m.stream, TimeUS: e.timeUS, Context: m.context}
	if e.stack > 0 {
		t.Frames = h.stacks[e.stack-1]
	}
	return t
}

// add stores e and returns its index.
func (h *history) add(e entry) int {
	last := len(h.chunks) - 1
	switch {
	case last < 0:
		h.chunks = append(h.chunks, make([]entry, 0, 64))
		last = 0
	case len(h.chunks[last]) == cap(h.chunks[last]):
		if c := h.chunks[last]; cap(c) < histChunk {
			// The first chunk starts small (a small snapshot costs
			// little) and doubles, then takes its full size at once:
			// each doubling past a few MB wrote its copy to fresh
			// memory in small pages (a fifth of the time of reading
			// a 135 MB snapshot).
			n := 2 * cap(c)
			if n > histChunk/8 {
				n = histChunk
			}
			grown := make([]entry, len(c), n)
			if n == histChunk {
				hugepages.Advise(grown)
				hugepages.PopulateAhead(grown, len(c), len(c)+2*histAhead)
			}
			copy(grown, c)
			h.chunks[last] = grown
			break
		}
		c := make([]entry, 0, histChunk)
		hugepages.Advise(c)
		hugepages.PopulateAhead(c, 0, 2*histAhead)
		h.chunks = append(h.chunks, c)
		last++
	}
	c := append(h.chunks[last], e)
	h.chunks[last] = c
	if len(c)&(histAhead-1) == 0 && cap(c) == histChunk {
		// The stretch after the next, faulted in on the other CPU
		// while this one and the next are filled (a full chunk
		// starts with its first two).
		hugepages.PopulateAhead(c, len(c)+histAhead, len(c)+2*histAhead)
	}
	h.n++
	return h.n - 1
}

// histAhead is how many entries ahead of the one written add has their
// pages faulted in: a huge page's worth (2 MiB).
const histAhead = 1 << 16

// work is what entries first to first+n-1 stand for: the fields and
// frames that a walk of their dicts would have visited (snapMapper.spend).
func (h *history) work(first, n int) int64 {
	var w int64
	for i := first; i < first+n; {
		c := h.chunks[i>>histChunkBits]
		off := i & histChunkMask
		run := c[off:min(len(c), off+first+n-i)]
		for k := range run {
			e := &run[k]
			w += 1 + int64(h.metas[e.meta].nkeys)
			if e.stack > 0 {
				w += int64(len(h.stacks[e.stack-1]))
			}
		}
		i += len(run)
	}
	return w
}

// historyBuilder stores entries given as TraceEntry in a history,
// interning what they share.
type historyBuilder struct {
	h      *history
	metas  map[entryMeta]uint32
	stacks map[stackKey]uint32
}

func newHistoryBuilder(h *history) *historyBuilder {
	return &historyBuilder{h: h, metas: map[entryMeta]uint32{}, stacks: map[stackKey]uint32{}}
}

// meta returns the id of m, storing it the first time.
func (b *historyBuilder) meta(m entryMeta) uint32 {
	id, ok := b.metas[m]
	if !ok {
		id = uint32(len(b.h.metas))
		b.h.metas = append(b.h.metas, m)
		b.metas[m] = id
	}
	return id
}

// stack returns the id of a stack slice (entries that share a slice
// share its id).
func (b *historyBuilder) stack(fr []Frame) uint32 {
	if len(fr) == 0 {
		return 0
	}
	k := keyOf(fr)
	id, ok := b.stacks[k]
	if !ok {
		b.h.stacks = append(b.h.stacks, fr)
		id = uint32(len(b.h.stacks))
		b.stacks[k] = id
	}
	return id
}

func (b *historyBuilder) trace(entries []TraceEntry) Trace {
	first := b.h.n
	for _, e := range entries {
		b.h.add(entry{addr: e.Addr, size: e.Size, timeUS: e.TimeUS, stack: b.stack(e.Frames),
			meta: b.meta(entryMeta{action: e.Action, stream: e.Stream, deviceFree: e.DeviceFree, context: e.Context})})
	}
	return Trace{h: b.h, first: first, n: b.h.n - first}
}
