package gzmembers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// traceLike is n bytes of text that compresses as a trace does.
func traceLike(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b bytes.Buffer
	names := []string{"aten::mm", "aten::add_", "aten::empty_strided", "python_function"}
	for b.Len() < n {
		fmt.Fprintf(&b, `{"ph": "X", "cat": "cpu_op", "name": %q, "ts": %d.%03d, "dur": %d},`+"\n",
			names[rng.IntN(len(names))], rng.Int64N(1e12), rng.IntN(1000), rng.IntN(5000))
	}
	return b.Bytes()[:n]
}

func indexed(t testing.TB, data []byte, memberSize int) []byte {
	t.Helper()
	var buf bytes.Buffer
	z, err := NewWriterSize(&buf, 6, memberSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := z.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads file with NewReader (br's buffer as the trace reader's
// Input has it), returning what it read and the error that ended it.
func readAll(file []byte, workers int) ([]byte, error) {
	return readLimited(file, workers, math.MaxInt64)
}

func readLimited(file []byte, workers int, limit int64) ([]byte, error) {
	r := NewReader(bufio.NewReaderSize(bytes.NewReader(file), 256<<10), workers)
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, limit))
}

func oneStreamLimited(file []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(file))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, limit))
}

// oneStream reads file as one gzip stream (the reader for every other file).
func oneStream(file []byte) ([]byte, error) { return oneStreamLimited(file, math.MaxInt64) }

// TestRoundTrip: every size around the member boundaries, with 1 to 4
// workers, reads back exactly, and the file is one ordinary gzip stream
// to any other reader.
func TestRoundTrip(t *testing.T) {
	const member = 64 << 10
	for _, n := range []int{0, 1, member - 1, member, member + 1, 5*member + 17, 40 * member} {
		data := traceLike(n, uint64(n))
		file := indexed(t, data, member)
		if !Indexed(bufio.NewReader(bytes.NewReader(file))) {
			t.Fatalf("%d bytes: the writer's file is not indexed", n)
		}
		if total, ok := TotalSize(bytes.NewReader(file), int64(len(file))); !ok || total != int64(n) {
			t.Fatalf("%d bytes: the file names %d (%v)", n, total, ok)
		}
		if got, err := oneStream(file); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: one-stream reader: %d bytes, %v", n, len(got), err)
		}
		for _, w := range []int{1, 2, 4} {
			got, err := readAll(file, w)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%d bytes, %d workers: %d bytes read, %v", n, w, len(got), err)
			}
		}
	}
}

// TestLargeMemberStreams: a member inflating past MaxInflated is inflated
// as it is read, and still checked.
func TestLargeMemberStreams(t *testing.T) {
	data := traceLike(MaxInflated+MaxInflated/2, 7)
	file := indexed(t, data, len(data)) // one member
	got, err := readAll(file, 2)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%d bytes read, %v", len(got), err)
	}
	bad := bytes.Clone(file)
	bad[len(bad)-8] ^= 1 // its CRC
	if _, err := readAll(bad, 2); !errors.Is(err, gzip.ErrChecksum) {
		t.Fatalf("a wrong CRC on a streamed member: %v, want %v", err, gzip.ErrChecksum)
	}
}

// TestCutShort: a file cut anywhere yields what the one-stream reader
// yields up to the cut, then io.ErrUnexpectedEOF (the snippet's process
// died while writing).
func TestCutShort(t *testing.T) {
	const member = 32 << 10
	data := traceLike(6*member, 3)
	file := indexed(t, data, member)
	for cut := 1; cut < len(file); cut += 1 + cut/7 {
		want, werr := oneStream(file[:cut])
		got, err := readAll(file[:cut], 3)
		if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(werr, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d of %d: error %v (one stream: %v), want %v", cut, len(file), err, werr, io.ErrUnexpectedEOF)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("cut at %d of %d: %d bytes read, the one-stream reader %d", cut, len(file), len(got), len(want))
		}
	}
}

// TestDamaged: a changed byte anywhere is an error (or, in a header's
// unchecked bytes, nothing), never a panic or a hang, and never other
// bytes than the one-stream reader's.
func TestDamaged(t *testing.T) {
	const member = 16 << 10
	data := traceLike(4*member, 5)
	file := indexed(t, data, member)
	for i := 0; i < len(file); i += 1 + i/11 {
		bad := bytes.Clone(file)
		bad[i] ^= 0x55
		got, err := readAll(bad, 2)
		want, werr := oneStream(bad)
		if err == nil && (werr != nil || !bytes.Equal(got, want)) {
			t.Fatalf("byte %d changed: read %d bytes and no error; one stream: %d bytes, %v", i, len(got), len(want), werr)
		}
	}
}

// TestMixedAndTrailing: indexed members followed by an ordinary member
// (files concatenated) read whole; bytes after the last member that are
// not a member are the one-stream reader's error.
func TestMixedAndTrailing(t *testing.T) {
	a, b := traceLike(100<<10, 1), traceLike(70<<10, 2)
	var plain bytes.Buffer
	zw := gzip.NewWriter(&plain)
	zw.Write(b)
	zw.Close()
	file := append(indexed(t, a, 32<<10), plain.Bytes()...)
	got, err := readAll(file, 2)
	if err != nil || !bytes.Equal(got, append(bytes.Clone(a), b...)) {
		t.Fatalf("indexed then plain: %d bytes, %v", len(got), err)
	}
	junk := append(indexed(t, a, 32<<10), "not gzip"...)
	_, err = readAll(junk, 2)
	_, werr := oneStream(junk)
	if err == nil || werr == nil || err.Error() != werr.Error() {
		t.Fatalf("trailing junk: %v, one stream: %v", err, werr)
	}
}

// TestHostileSizes: a member that names a size past MaxCompressed is read
// in order (no buffer of that size); a size that runs past the file reads
// as a file cut short.
func TestHostileSizes(t *testing.T) {
	data := traceLike(50<<10, 9)
	file := indexed(t, data, 1<<20)
	big := bytes.Clone(file)
	big[16], big[17], big[18], big[19] = 0xff, 0xff, 0xff, 0x7f
	if Indexed(bufio.NewReader(bytes.NewReader(big))) {
		t.Fatal("a member naming 2 GiB of compressed data is read in parallel")
	}
	long := bytes.Clone(file)
	long[17]++ // 256 bytes more than there are
	if _, err := readAll(long, 2); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a size past the end: %v, want %v", err, io.ErrUnexpectedEOF)
	}
}

// TestCloseEarly: closing before the end stops the goroutines (the race
// detector and the leak of a blocked producer would show it).
func TestCloseEarly(t *testing.T) {
	file := indexed(t, traceLike(2<<20, 4), 16<<10)
	br := bufio.NewReaderSize(bytes.NewReader(file), 256<<10)
	r := NewReader(br, 4)
	var p [1000]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
}

func FuzzReader(f *testing.F) {
	f.Add(indexed(f, traceLike(3000, 1), 1000))
	f.Add(indexed(f, nil, 1000))
	f.Fuzz(func(t *testing.T, file []byte) {
		// A few bytes can name gigabytes (a deflate bomb, as the
		// readers' limits see it): compare the first 16 MiB.
		got, err := readLimited(file, 2, 16<<20)
		if err != nil {
			return
		}
		want, werr := oneStreamLimited(file, 16<<20)
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes, the one-stream reader %d", len(got), len(want))
		}
	})
}

func BenchmarkRead(b *testing.B) {
	data := traceLike(64<<20, 1)
	file := indexed(b, data, MemberSize)
	for _, w := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := io.Copy(io.Discard, NewReader(bufio.NewReaderSize(bytes.NewReader(file), 256<<10), w)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
