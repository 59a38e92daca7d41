package snapshot

import "testing"

// TestTraceAcrossChunks: traces whose entries cross the history's chunk
// boundaries (a 1 GB snapshot's do; no testdata snapshot's do) read the
// same entries by index, in order, early stop included, and count the
// same work as entry by entry.
func TestTraceAcrossChunks(t *testing.T) {
	st := []Frame{{Filename: "a.py", Line: 1, Name: "f"}, {Filename: "b.py", Line: 2, Name: "g"}}
	ctx := &EntryContext{UserMetadata: "m"}
	h := &history{stacks: [][]Frame{st}, metas: []entryMeta{{action: ActionAlloc, nkeys: 9}, {action: ActionFreeCompleted, stream: 7, context: ctx, nkeys: 8}}}
	n := 2*histChunk + 3
	for i := range n {
		h.add(entry{addr: uint64(i), size: int64(i % 1000), timeUS: int64(3 * i), meta: uint32(i % 2), stack: uint32(i % 3 % 2)})
	}
	if len(h.chunks) != 3 {
		t.Fatalf("%d chunks for %d entries", len(h.chunks), n)
	}
	want := func(i int) TraceEntry {
		e := TraceEntry{Action: ActionAlloc, Addr: uint64(i), Size: int64(i % 1000), TimeUS: int64(3 * i)}
		if i%2 == 1 {
			e.Action, e.Stream, e.Context = ActionFreeCompleted, 7, ctx
		}
		if i%3%2 == 1 {
			e.Frames = st
		}
		return e
	}
	for _, span := range [][2]int{{0, n}, {histChunk - 5, 10}, {histChunk - 1, histChunk + 2}, {2 * histChunk, 3}, {7, 0}} {
		tr := Trace{h: h, first: span[0], n: span[1]}
		k := 0
		var w int64
		for i, e := range tr.All() {
			if i != k || !sameEntry(e, want(span[0]+i)) || !sameEntry(tr.At(i), e) {
				t.Fatalf("span %v: entry %d (%dth in order): %+v, want %+v", span, i, k, e, want(span[0]+i))
			}
			w += h.work(span[0]+i, 1)
			k++
		}
		if k != span[1] || tr.Len() != span[1] {
			t.Errorf("span %v: %d entries in order, Len %d", span, k, tr.Len())
		}
		if got := h.work(span[0], span[1]); got != w {
			t.Errorf("span %v: work %d, entry by entry %d", span, got, w)
		}
		stopped := 0
		for i := range tr.All() {
			if i == histChunk/2 {
				break
			}
			stopped++
		}
		if stopped != min(span[1], histChunk/2) {
			t.Errorf("span %v: %d entries before the break", span, stopped)
		}
	}
}

// sameEntry compares two entries field by field, Frames by identity (the
// history shares one slice per stack). reflect.DeepEqual over the million
// entries took 5 s of this test's 5.7.
func sameEntry(a, b TraceEntry) bool {
	sameFrames := len(a.Frames) == len(b.Frames) && (len(a.Frames) == 0 || &a.Frames[0] == &b.Frames[0])
	return sameFrames && a.Action == b.Action && a.Addr == b.Addr && a.DeviceFree == b.DeviceFree &&
		a.Size == b.Size && a.Stream == b.Stream && a.TimeUS == b.TimeUS && a.Context == b.Context
}
