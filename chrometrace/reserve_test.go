package chrometrace

import (
	"bytes"
	"path/filepath"
	"testing"
)

// A trace read with its record lists sized from a size hint (right, too
// small: the lists outgrow their slices, too large) is the trace read
// without one.
func TestReserveKeepsTrace(t *testing.T) {
	// Batches of 64 KiB: the lists are sized after a few of them.
	reserveEarly(t, 64<<10)
	for _, name := range []string{"leak_module_cache", "resnet_train_clean"} {
		data := gunzipFile(t, filepath.Join("..", "testdata", "traces", name, "trace.json.gz"))
		render := func(hint int64) string {
			tr, text := readWithHint(t, data, hint)
			if tr.reservedLists != (hint > 0) {
				t.Fatalf("%s hint %d: reserved %v", name, hint, tr.reservedLists)
			}
			return text
		}
		want := render(0)
		n := int64(len(data))
		for _, hint := range []int64{n, n / 6, 4 * n} {
			if got := render(hint); got != want {
				t.Errorf("%s: hint %d of %d bytes changes the trace", name, hint, n)
			}
		}
	}
}

// TestRegrowKeepsTrace: with the estimates' margin lowered to a quarter,
// the reserved slices fill up long before the input ends; each list is
// reserved again as it fills (regrow), and the trace is the one read
// without a hint. With the hint right, finish finds every list in one
// slice (copies none); with the hint too small, a list continues in
// chunks past it, and the trace is still the same.
func TestRegrowKeepsTrace(t *testing.T) {
	reserveEarly(t, 16<<10)
	defer func(bb int, r float64) { batchBytes, reserveMargin = bb, r }(batchBytes, reserveMargin)
	batchBytes, reserveMargin = 16<<10, 0.25
	for _, name := range []string{"leak_module_cache", "resnet_train_clean"} {
		data := gunzipFile(t, filepath.Join("..", "testdata", "traces", name, "trace.json.gz"))
		read := func(hint int64) (*Trace, string) { return readWithHint(t, data, hint) }
		_, want := read(0)
		n := int64(len(data))
		tr, got := read(n)
		if got != want {
			t.Errorf("%s: lists reserved again as they fill, the trace differs", name)
		}
		if tr.regrownLists == 0 || tr.copiedLists != 0 {
			t.Errorf("%s, hint right: %d slices reserved again, %d lists copied from chunks; want some, none", name, tr.regrownLists, tr.copiedLists)
		}
		if tr, got = read(n / 4); got != want || tr.copiedLists == 0 {
			t.Errorf("%s, hint a quarter: the trace differs (%v) or no list continued in chunks (%d)", name, got != want, tr.copiedLists)
		}
	}
}

// readWithHint reads the trace JSON data as if its size hint were hint
// (0: none), returning the trace and its canonical text.
func readWithHint(t *testing.T, data []byte, hint int64) (*Trace, string) {
	t.Helper()
	in, err := NewInput(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	in.sizeHint = hint
	tr, err := Read(in, ReadOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	WriteCanonical(&buf, tr)
	return tr, buf.String()
}

// reserveEarly makes Read size its record lists after the first batches,
// of chunk bytes each, for the rest of the test.
func reserveEarly(t *testing.T, chunk int) {
	m, c, mc := reserveMin, specChunkBytes, maxSpecChunkBytes
	t.Cleanup(func() { reserveMin, specChunkBytes, maxSpecChunkBytes = m, c, mc })
	reserveMin, specChunkBytes, maxSpecChunkBytes = 1, chunk, 4<<20
}
