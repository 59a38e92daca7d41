// Package bombtest holds what the readers' hostile-input tests share: a
// reader that makes an input of any size as it is read, and a sampler of
// the live heap, so a test can assert that a reader's memory is bounded
// whatever the input's size, without a big file in the repository;
// and GzipBomb, a small gzip that inflates to gigabytes.
package bombtest

import (
	"io"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// Reader yields Head, then N bytes of Fill (repeated), then Tail,
// generated as read: a bomb of any size without a file.
type Reader struct {
	Head, Fill, Tail []byte
	N                int64 // fill bytes left
	read             int64
}

func (r *Reader) Read(p []byte) (int, error) {
	k := 0
	for k < len(p) {
		switch {
		case len(r.Head) > 0:
			c := copy(p[k:], r.Head)
			r.Head = r.Head[c:]
			k += c
		case r.N > 0:
			end := k + int(min(r.N, int64(len(p)-k)))
			c := copy(p[k:end], r.Fill[r.read%int64(len(r.Fill)):])
			r.N -= int64(c)
			r.read += int64(c)
			k += c
		case len(r.Tail) > 0:
			c := copy(p[k:], r.Tail)
			r.Tail = r.Tail[c:]
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

// PeakHeap runs fn while sampling the live heap every millisecond
// (runtime/metrics, no stop-the-world) and returns the largest sample above
// the heap before fn started.
func PeakHeap(fn func()) uint64 {
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
