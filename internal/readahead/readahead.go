// Package readahead is the one read-ahead of the readers: a source read
// on a goroutine of its own, a few buffers ahead of the reader that
// parses it, so that inflating a gzip stream (or a plain file's read
// system calls) runs beside the parsing rather than in it.
//
// It starts late and can be bypassed: reads pass straight through until
// After bytes have gone by, so a small input (a summary, a short log)
// never starts the goroutine or allocates its buffers, and a reader that
// runs its own goroutines and fills large buffers of its own (the trace
// reader's batches) takes the source itself with Direct and pays no copy
// and no hand-off.
package readahead

import "io"

const (
	bufSize = 1 << 20
	bufs    = 4
)

// Reader reads Src, ahead on a goroutine once After bytes have been read.
type Reader struct {
	src   io.Reader
	after int64
	read  int64
	// direct: Direct handed src to the caller; the goroutine never starts.
	direct bool

	full chan chunk
	free chan []byte
	stop chan struct{}
	cur  chunk
	off  int
}

type chunk struct {
	b   []byte
	err error
}

// New reads src, ahead past the first after bytes.
func New(src io.Reader, after int64) *Reader { return &Reader{src: src, after: after} }

// Started says whether the goroutine runs (or ran).
func (r *Reader) Started() bool { return r.full != nil }

func (r *Reader) Read(p []byte) (int, error) {
	if r.full == nil {
		if r.read < r.after || r.direct {
			n, err := r.src.Read(p)
			r.read += int64(n)
			return n, err
		}
		r.start()
	}
	for r.off == len(r.cur.b) {
		if r.cur.err != nil {
			return 0, r.cur.err
		}
		if r.cur.b != nil {
			r.free <- r.cur.b[:cap(r.cur.b)]
		}
		r.cur, r.off = <-r.full, 0
	}
	n := copy(p, r.cur.b[r.off:])
	r.off += n
	return n, nil
}

// Direct returns what to read the rest from: the source itself when the
// goroutine has not started (and then never will), else r.
func (r *Reader) Direct() io.Reader {
	if r.full != nil {
		return r
	}
	r.direct = true
	return r.src
}

func (r *Reader) start() {
	r.full = make(chan chunk, bufs)
	r.free = make(chan []byte, bufs)
	r.stop = make(chan struct{})
	for range bufs {
		r.free <- make([]byte, bufSize)
	}
	go func() {
		for {
			var b []byte
			select {
			case b = <-r.free:
			case <-r.stop:
				return
			}
			select { // a stop wins over a free buffer
			case <-r.stop:
				return
			default:
			}
			n, empty := 0, 0
			var err error
			for n < len(b) && err == nil {
				var k int
				k, err = r.src.Read(b[n:])
				n += k
				if k == 0 && err == nil {
					if empty++; empty > 100 {
						err = io.ErrNoProgress
					}
				}
			}
			// Never blocks: there are as many slots as buffers.
			r.full <- chunk{b[:n], err}
			if err != nil {
				return
			}
		}
	}()
}

// Close stops the goroutine: it reads the source no more once the read
// it may be in returns, and never blocks after it (its last chunk has a
// free slot). Close does not wait for that read (a pipe that stays
// silent would hang the caller's exit) and does not close the source, so
// the source must be safe to leave mid-read: an os.File is (its Close
// waits for nothing), and a gzip.Reader needs no closing.
func (r *Reader) Close() error {
	if r.stop != nil {
		select {
		case <-r.stop:
		default:
			close(r.stop)
		}
	}
	return nil
}
