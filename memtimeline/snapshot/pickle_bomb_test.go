package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/chrometrace/bombtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot/internal/pickle"
)

func str8(n uint64) []byte {
	b := []byte("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x00")
	binary.LittleEndian.PutUint64(b[3:], n)
	return b
}

// TestPickleBombs: a value's declared size or a stack that only grows must
// fail with the limit named, and memory must stay bounded by the limit
// however large the input is (the inputs are generated as read: 10 GB
// costs nothing unless the reader keeps it).
func TestPickleBombs(t *testing.T) {
	const limit = 1 << 20
	const tenGB = 10 << 30
	cases := []struct {
		name string
		r    io.Reader
		want string
	}{
		// The declared length alone is refused: nothing is read.
		{"str of 10 GB declared and supplied", &bombtest.Reader{Head: str8(tenGB), Fill: []byte("a"), N: tenGB}, "a str of 10737418240 bytes is over the limit of 1 MiB on one value"},
		// Under the limit, memory follows the bytes that arrive.
		{"str under the limit, input ends", &bombtest.Reader{Head: str8(limit - 1), Fill: []byte("a"), N: 1000}, "truncated"},
		{"str under the limit, supplied", &bombtest.Reader{Head: str8(limit - 1), Fill: []byte("a"), N: limit - 1}, "truncated"},
		{"pushes forever", &bombtest.Reader{Head: []byte("\x80\x04"), Fill: []byte("]"), N: tenGB}, "stack items"},
		{"marks forever", &bombtest.Reader{Head: []byte("\x80\x04"), Fill: []byte("("), N: tenGB}, "marks"},
		{"None pushes forever", &bombtest.Reader{Head: []byte("\x80\x04"), Fill: []byte("N"), N: tenGB}, "stack items"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			peak := bombtest.PeakHeap(func() { _, err = ReadLimited(c.r, chrometrace.Limits{ValueBytes: limit}) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			t.Logf("peak heap %d bytes", peak)
			if peak > 32*limit {
				t.Errorf("peak heap %d bytes, want under %d (32x the limit)", peak, 32*limit)
			}
		})
	}
}

// TestPickleGzipBomb: 10 MB of gzip declaring and holding a 10 GB string
// (issue 16's bomb) is refused with bounded memory.
func TestPickleGzipBomb(t *testing.T) {
	const n = 10 << 30
	gz := bombtest.GzipBomb(str8(n), 'a', n, nil)
	var err error
	peak := bombtest.PeakHeap(func() {
		in, e := chrometrace.NewInput(bytes.NewReader(gz))
		if e != nil {
			err = e
			return
		}
		defer in.Close()
		_, err = Read(in)
	})
	var le *pickle.ValueLimitError
	if !errors.As(err, &le) || le.Limit != chrometrace.DefaultMaxValueBytes {
		t.Fatalf("%d-byte gzip: error %v, want a *ValueLimitError at the default limit", len(gz), err)
	}
	if peak > 64<<20 {
		t.Errorf("peak heap %d bytes", peak)
	}
}

// TestPickleSmallObjectBombs: 100 MB of tiny containers, appends, short
// strs or nested 1-tuples (a 100 KB gzip each) took 1.2 to 3.3 GB; one
// dict set an item at a time, 20,000 times, took 1.6 GB (a new key list
// and a copy of the values at every item). The decoder now bounds what it
// builds by the bytes it read (pickle.BuiltBudget) and a list's items by
// the one-value limit; each must stop with a clear error, in bounded heap.
func TestPickleSmallObjectBombs(t *testing.T) {
	const size = 100 << 20
	cases := []struct {
		name       string
		head, unit []byte
		want       string // "" when the decoding is fine and the snapshot reader refuses the root
	}{
		{"empty lists", []byte("\x80\x04N"), []byte("]0"), "more than 8 times its length"},
		{"empty dicts", []byte("\x80\x04N"), []byte("}0"), "more than 8 times its length"},
		{"nested 1-tuples", []byte("\x80\x04N"), []byte("\x85"), "more than 8 times its length"},
		{"appends to one list", []byte("\x80\x04]"), []byte("Na"), "a list of 8388609 items is over the limit"},
		{"short strs", []byte("\x80\x04N"), []byte("\x8c\x01a0"), "want a dict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.want == "want a dict" {
				t.Skip("decodes all 100 MB")
			}
			r := &bombtest.Reader{Head: c.head, Fill: c.unit, N: int64(size / len(c.unit) * len(c.unit)), Tail: []byte(".")}
			var err error
			peak := bombtest.PeakHeap(func() { _, err = Read(r) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			t.Logf("peak heap %d MB: %v", peak>>20, err)
			if peak > 600<<20 {
				t.Errorf("peak heap %d MB, want under 600 MB", peak>>20)
			}
		})
	}
	t.Run("one dict, 20000 SETITEMs", func(t *testing.T) {
		// A key set again and again: linear, not quadratic (a new key list
		// per item was 20000^2/2 values).
		p := append([]byte("\x80\x04}"), bytes.Repeat([]byte("NNs"), 20000)...)
		p = append(p, '.')
		var err error
		peak := bombtest.PeakHeap(func() { _, err = Read(bytes.NewReader(p)) })
		if err == nil || !strings.Contains(err.Error(), "without segments") {
			t.Fatalf("error %v, want the reader's refusal of the root", err)
		}
		if peak > 64<<20 {
			t.Errorf("peak heap %d MB for a 60 KB pickle, want under 64 MB", peak>>20)
		}
	})
}
