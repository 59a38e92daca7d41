// Package gzmembers inflates a gzip file made of independent members on
// several cores at once, when each member names its compressed size in
// its header: an "MZ" extra subfield of 4 bytes, the little-endian length
// of the member's deflate data (mgzip's convention, which torchmem's
// snippet writes, a member per MiB of input). One gzip stream can only be
// inflated in order on one core; with the sizes, the reader finds where
// every member starts without inflating the one before, and a trace's
// reading is no longer held to one core's inflating speed.
//
// Any gzip reader reads such a file as one stream, and this reader reads
// any gzip file: from the first member that names no size (or a size past
// its bounds) it goes on in order, as the one-stream reader does, with
// that reader's errors. Its own errors are that reader's too:
// io.ErrUnexpectedEOF for a file cut short (after every byte inflated up
// to the cut), gzip.ErrChecksum, gzip.ErrHeader, flate.CorruptInputError.
package gzmembers

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
)

// Bounds on what a member may make the reader hold: its compressed data
// is read whole before a worker inflates it, and its inflated bytes are
// held until read. A member inflating to more than MaxInflated (its
// trailer says so) is inflated as it is read, on the reader's goroutine,
// never held; one whose compressed data is over MaxCompressed ends the
// parallel reading (the rest is read in order). The snippet's members
// are 1 MiB inflated, about 100 KiB compressed.
const (
	MaxCompressed = 4 << 20
	MaxInflated   = 4 << 20
)

// gzip header flags (RFC 1952).
const (
	flagHCRC    = 1 << 1
	flagExtra   = 1 << 2
	flagName    = 1 << 3
	flagComment = 1 << 4
)

// Indexed reports whether br starts with a member that names its
// compressed size; it only peeks.
func Indexed(br *bufio.Reader) bool {
	_, _, ok := peekHeader(br)
	return ok
}

// peekHeader reads the header of the member br starts with, without
// consuming it: its length and the compressed size its MZ subfield names.
// ok is false for anything else (no member, no MZ subfield, a header
// that does not fit br's buffer), which the one-stream reader then reads.
func peekHeader(br *bufio.Reader) (hdrLen int, size uint32, ok bool) {
	h, _ := br.Peek(12)
	if len(h) < 12 || h[0] != 0x1f || h[1] != 0x8b || h[2] != 8 || h[3]&0xe0 != 0 || h[3]&flagExtra == 0 {
		return 0, 0, false
	}
	flags := h[3]
	xlen := int(binary.LittleEndian.Uint16(h[10:]))
	n := 12 + xlen
	h, _ = br.Peek(n)
	if len(h) < n {
		return 0, 0, false
	}
	found := false
	for x := h[12:n]; len(x) >= 4; {
		sl := int(binary.LittleEndian.Uint16(x[2:]))
		if 4+sl > len(x) {
			return 0, 0, false
		}
		if x[0] == 'M' && x[1] == 'Z' && sl == 4 {
			size, found = binary.LittleEndian.Uint32(x[4:]), true
		}
		x = x[4+sl:]
	}
	if !found || size > MaxCompressed {
		return 0, 0, false
	}
	for _, f := range []byte{flagName, flagComment} {
		if flags&f == 0 {
			continue
		}
		// A zero-terminated string, within the buffer.
		for {
			h, _ = br.Peek(n + 1)
			if len(h) < n+1 {
				return 0, 0, false
			}
			n++
			if h[n-1] == 0 {
				break
			}
		}
	}
	if flags&flagHCRC != 0 {
		n += 2
		if h, _ = br.Peek(n); len(h) < n {
			return 0, 0, false
		}
	}
	return n, size, true
}

// member is one member on its way to the reader, in file order.
type member struct {
	data      []byte // compressed
	crc, size uint32 // the trailer's
	// cut: the file ends inside this member (data is what there was; no
	// trailer): its bytes are inflated up to the cut, then
	// io.ErrUnexpectedEOF, as the one-stream reader does.
	cut bool
	// stream: inflated as it is read (over MaxInflated), by the reader.
	stream bool
	out    []byte
	err    error
	done   chan struct{} // closed when out and err are set (not stream)
	// rest, on the last member sent: the file from there, read in order;
	// readErr: reading the file failed there.
	rest    io.Reader
	readErr error
}

// Reader reads the inflated bytes of the members in order.
type Reader struct {
	queue chan *member // in file order, from the producer
	stop  chan struct{}
	once  sync.Once
	cur   *member
	off   int
	// streaming state of cur when cur.stream or cur.cut.
	fr  io.ReadCloser
	crc uint32
	n   uint32
	// outPool and dataPool are the inflated and compressed buffers
	// of members done with, for the next ones: fresh memory is dear.
	outPool, dataPool chan []byte
	err               error // sticky, once the members are done
}

// NewReader reads the gzip file br holds from here, inflating indexed
// members on up to workers goroutines (at least 1). Call Close to stop
// its goroutines before reading to the end.
func NewReader(br *bufio.Reader, workers int) *Reader {
	workers = max(workers, 1)
	// A member for each worker and two ready for the reader, ~1 MiB each:
	// on 16 cores (8 workers) ops on the 1 GB bench trace peaks at 155 MiB,
	// 140 MiB as one stream; two per worker took 166 MiB, no faster.
	inFlight := workers + 2
	r := &Reader{
		queue:    make(chan *member, inFlight),
		stop:     make(chan struct{}),
		outPool:  make(chan []byte, inFlight+2),
		dataPool: make(chan []byte, inFlight+2),
	}
	work := make(chan *member, inFlight)
	for range workers {
		go r.worker(work)
	}
	go r.produce(br, work)
	return r
}

// produce reads the members, handing each to a worker and, in order, to
// the reader; it ends at the end of the file, at its first member that
// names no size (handing on the rest), or when the reader is closed.
func (r *Reader) produce(br *bufio.Reader, work chan<- *member) {
	defer close(work)
	defer close(r.queue)
	send := func(m *member) bool {
		select {
		case r.queue <- m:
			return true
		case <-r.stop:
			return false
		}
	}
	for {
		if _, err := br.Peek(1); err != nil {
			if err != io.EOF {
				send(&member{readErr: err})
			}
			return
		}
		hdrLen, size, ok := peekHeader(br)
		if !ok {
			rest, err := gzip.NewReader(br)
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF // a header cut short
				}
				send(&member{readErr: err})
				return
			}
			send(&member{rest: rest})
			return
		}
		br.Discard(hdrLen) //nolint:errcheck // peeked
		m := &member{data: r.dataBuffer(int(size))}
		n, err := io.ReadFull(br, m.data)
		var trailer [8]byte
		if err == nil {
			_, err = io.ReadFull(br, trailer[:])
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			m.data, m.cut = m.data[:n], true
		case err != nil:
			send(&member{readErr: err})
			return
		default:
			m.crc = binary.LittleEndian.Uint32(trailer[:])
			m.size = binary.LittleEndian.Uint32(trailer[4:])
			m.stream = m.size > MaxInflated
		}
		if !m.cut && !m.stream {
			m.done = make(chan struct{})
		}
		if !send(m) {
			return
		}
		if m.done != nil {
			// As many slots as the queue, and the reader's member
			// may still be in it: a wait here lasts until a worker
			// takes one, which nothing else holds up.
			work <- m
		}
		if m.cut {
			return
		}
	}
}

// worker inflates whole members.
func (r *Reader) worker(work <-chan *member) {
	var fr io.ReadCloser
	src := new(bytes.Reader)
	for m := range work {
		src.Reset(m.data)
		if fr == nil {
			fr = flate.NewReader(src)
		} else {
			fr.(flate.Resetter).Reset(src, nil) //nolint:errcheck // never fails
		}
		m.out, m.err = inflate(fr, src, r.buffer(int(m.size)), m.crc, m.size)
		select { // reused: a trace's members would be ~10% of it in garbage
		case r.dataPool <- m.data[:0]:
		default:
		}
		m.data = nil
		close(m.done)
	}
}

// inflate inflates a whole member into out (len 0, cap size) and checks
// it against its trailer and the end of its compressed data.
func inflate(fr io.Reader, src *bytes.Reader, out []byte, crc, size uint32) ([]byte, error) {
	out = out[:size]
	n, err := io.ReadFull(fr, out)
	out = out[:n]
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = gzip.ErrChecksum // fewer bytes than the trailer says
		}
		return out, err
	}
	var one [1]byte
	if k, err := fr.Read(one[:]); k > 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = gzip.ErrChecksum // more bytes than the trailer says
		}
		return out, err
	}
	if src.Len() != 0 || crc32.ChecksumIEEE(out) != crc {
		return out, gzip.ErrChecksum
	}
	return out, nil
}

// dataBuffer is a buffer for n bytes of compressed data, reused when it
// can be.
func (r *Reader) dataBuffer(n int) []byte {
	select {
	case b := <-r.dataPool:
		if cap(b) >= n {
			return b[:n]
		}
	default:
	}
	return make([]byte, n)
}

// buffer is an output buffer of capacity n at least, reused when it can be.
func (r *Reader) buffer(n int) []byte {
	select {
	case b := <-r.outPool:
		if cap(b) >= n {
			return b[:0]
		}
	default:
	}
	return make([]byte, 0, n)
}

func (r *Reader) recycle(b []byte) {
	if cap(b) > MaxInflated {
		return
	}
	select {
	case r.outPool <- b[:0]:
	default:
	}
}

// Read reads the inflated bytes, in order.
func (r *Reader) Read(p []byte) (int, error) {
	for {
		if r.err != nil {
			return 0, r.err
		}
		if r.cur == nil {
			m, ok := <-r.queue
			if !ok {
				r.err = io.EOF
				continue
			}
			r.cur, r.off = m, 0
			if m.stream || m.cut {
				src := bytes.NewReader(m.data)
				r.fr, r.crc, r.n = flate.NewReader(src), 0, 0
			}
		}
		m := r.cur
		switch {
		case m.rest != nil:
			n, err := m.rest.Read(p)
			if err != nil {
				r.err = err
			}
			return n, err
		case m.readErr != nil:
			r.err = m.readErr
			continue
		case m.stream || m.cut:
			if len(p) == 0 {
				return 0, nil
			}
			q := p
			if !m.cut && uint64(len(q)) > uint64(m.size-r.n)+1 {
				q = q[:m.size-r.n+1] // a byte past the trailer's size is an error
			}
			n, err := r.fr.Read(q)
			r.crc = crc32.Update(r.crc, crc32.IEEETable, q[:n])
			r.n += uint32(n)
			switch {
			case !m.cut && r.n > m.size:
				r.err = gzip.ErrChecksum // more bytes than the trailer says
			case err == io.EOF && m.cut:
				r.err = io.ErrUnexpectedEOF // the trailer was cut off
			case err == io.EOF && (r.crc != m.crc || r.n != m.size):
				r.err = gzip.ErrChecksum
			case err == io.EOF:
				r.cur = nil
			case err != nil:
				if m.cut {
					err = io.ErrUnexpectedEOF
				}
				r.err = err
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		<-m.done
		if r.off < len(m.out) {
			n := copy(p, m.out[r.off:])
			r.off += n
			return n, nil
		}
		if m.err != nil {
			r.err = m.err
			continue
		}
		r.recycle(m.out)
		r.cur = nil
	}
}

// Close stops the reader's goroutines; it never fails.
func (r *Reader) Close() error {
	r.once.Do(func() { close(r.stop) })
	return nil
}

// The member a Writer ends a file with: empty, its header naming the
// file's inflated size in a "TS" subfield of 8 bytes (after its "MZ",
// which names the 2 bytes of its empty deflate block). A gzip trailer's
// size is its member's alone, modulo 4 GiB; this one gives a reader the
// whole, exactly, from the file's last bytes, to size what it builds.
const totalMemberLen = 42

var totalMemberHead = []byte{
	0x1f, 0x8b, 8, flagExtra, 0, 0, 0, 0, 0, 255, 20, 0,
	'M', 'Z', 4, 0, 2, 0, 0, 0,
	'T', 'S', 8, 0,
}

// TotalSize reads the inflated size a Writer's file of size bytes names
// in its last member; ok is false for any other file. The size is the
// writer's word, a hint for sizing, never trusted as a bound.
func TotalSize(f io.ReaderAt, size int64) (total int64, ok bool) {
	if size < totalMemberLen {
		return 0, false
	}
	var end [totalMemberLen]byte
	if _, err := f.ReadAt(end[:], size-totalMemberLen); err != nil {
		return 0, false
	}
	if !bytes.Equal(end[:24], totalMemberHead) || end[32] != 3 || end[33] != 0 || binary.LittleEndian.Uint64(end[34:]) != 0 {
		return 0, false
	}
	t := binary.LittleEndian.Uint64(end[24:])
	return int64(t), t < 1<<62
}
