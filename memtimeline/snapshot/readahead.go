package snapshot

import "io"

// readAhead passes reads through to src until aheadAfter bytes have been
// read, then reads src on a goroutine of its own, up to aheadBufs buffers
// of aheadBuf bytes ahead of the decoder: the read system calls of a
// large plain pickle (a twentieth of decoding 1 GB) run beside it, not in
// it. A small input never starts the goroutine or its buffers. close
// stops the goroutine (after the read it is in, if any).
type readAhead struct {
	src  io.Reader
	read int64
	full chan aheadChunk
	free chan []byte
	stop chan struct{}
	cur  aheadChunk
	off  int
}

type aheadChunk struct {
	b   []byte
	err error
}

// aheadAfter is a variable for tests (TestFastPathsOnRealSnapshots).
var aheadAfter int64 = 16 << 20

const (
	aheadBuf  = 1 << 20
	aheadBufs = 4
)

func (r *readAhead) Read(p []byte) (int, error) {
	if r.full == nil {
		if r.read < aheadAfter {
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

func (r *readAhead) start() {
	r.full = make(chan aheadChunk, aheadBufs)
	r.free = make(chan []byte, aheadBufs)
	r.stop = make(chan struct{})
	for range aheadBufs {
		r.free <- make([]byte, aheadBuf)
	}
	go func() {
		for {
			var b []byte
			select {
			case b = <-r.free:
			case <-r.stop:
				return
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
			r.full <- aheadChunk{b[:n], err}
			if err != nil {
				return
			}
		}
	}()
}

func (r *readAhead) close() {
	if r.stop != nil {
		close(r.stop)
	}
}
