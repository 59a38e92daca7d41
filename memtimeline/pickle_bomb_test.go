package memtimeline

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/torchmem/torchmem/chrometrace"
)

// repeatReader yields head, then n bytes of fill (repeated), then tail,
// generated as read: a bomb of any size without a file.
type repeatReader struct {
	head, fill, tail []byte
	n                int64 // fill bytes left
	read             int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	k := 0
	for k < len(p) {
		switch {
		case len(r.head) > 0:
			c := copy(p[k:], r.head)
			r.head = r.head[c:]
			k += c
		case r.n > 0:
			end := k + int(min(r.n, int64(len(p)-k)))
			c := copy(p[k:end], r.fill[r.read%int64(len(r.fill)):])
			r.n -= int64(c)
			r.read += int64(c)
			k += c
		case len(r.tail) > 0:
			c := copy(p[k:], r.tail)
			r.tail = r.tail[c:]
			k += c
		default:
			if k == 0 {
				return 0, io.EOF
			}
			return k, nil
		}
	}
	return k, nil
}

// peakHeap runs fn while sampling the live heap every millisecond
// (runtime/metrics, no stop-the-world) and returns the largest sample above
// the heap before fn started.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	peak = max(peak, read())
	if peak < base {
		return 0
	}
	return peak - base
}

// gzipBomb returns head + n bytes of fill (n a multiple of 1 MiB) as a
// multi-member gzip: one member for head + 1 MiB of fill, then copies of
// one compressed MiB of fill, so 10 GB cost ~10 MB and no time to make.
func gzipBomb(t testing.TB, head []byte, fill byte, n int64) []byte {
	t.Helper()
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	mib := bytes.Repeat([]byte{fill}, 1<<20)
	out := member(append(append([]byte(nil), head...), mib...))
	m := member(mib)
	for i := int64(1); i < n>>20; i++ {
		out = append(out, m...)
	}
	return out
}

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
	defer func(old int) { MaxPickleValueBytes = old }(MaxPickleValueBytes)
	MaxPickleValueBytes = limit
	const tenGB = 10 << 30
	cases := []struct {
		name string
		r    io.Reader
		want string
	}{
		// The declared length alone is refused: nothing is read.
		{"str of 10 GB declared and supplied", &repeatReader{head: str8(tenGB), fill: []byte("a"), n: tenGB}, "a str of 10737418240 bytes is over the limit of 1 MiB on one value"},
		// Under the limit, memory follows the bytes that arrive.
		{"str under the limit, input ends", &repeatReader{head: str8(limit - 1), fill: []byte("a"), n: 1000}, "truncated"},
		{"str under the limit, supplied", &repeatReader{head: str8(limit - 1), fill: []byte("a"), n: limit - 1}, "truncated"},
		{"pushes forever", &repeatReader{head: []byte("\x80\x04"), fill: []byte("]"), n: tenGB}, "stack items"},
		{"marks forever", &repeatReader{head: []byte("\x80\x04"), fill: []byte("("), n: tenGB}, "marks"},
		{"None pushes forever", &repeatReader{head: []byte("\x80\x04"), fill: []byte("N"), n: tenGB}, "stack items"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			peak := peakHeap(func() { _, err = ReadSnapshot(c.r) })
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
	gz := gzipBomb(t, str8(n), 'a', n)
	var err error
	peak := peakHeap(func() {
		in, e := chrometrace.NewInput(bytes.NewReader(gz))
		if e != nil {
			err = e
			return
		}
		defer in.Close()
		_, err = ReadSnapshot(in)
	})
	var le *ValueLimitError
	if !errors.As(err, &le) || le.Limit != MaxPickleValueBytes {
		t.Fatalf("%d-byte gzip: error %v, want a *ValueLimitError at the default limit", len(gz), err)
	}
	if peak > 64<<20 {
		t.Errorf("peak heap %d bytes", peak)
	}
}
