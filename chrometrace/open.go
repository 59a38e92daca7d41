package chrometrace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/klauspost/compress/gzip"
	"github.com/torchmem/torchmem/internal/gzmembers"
	"github.com/torchmem/torchmem/internal/readahead"
)

// gzipMagic starts every gzip member; file names lie (a .json that is
// gzipped, a .gz that is not), so the content decides.
var gzipMagic = []byte{0x1f, 0x8b}

// ErrEmpty is returned for an input with no bytes at all.
var ErrEmpty = errors.New("file is empty")

// Open opens path for reading and transparently decompresses gzip, detected
// by its magic bytes. The returned reader is buffered; Peek lets callers
// sniff the content type without consuming it.
func Open(path string) (*Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	in, err := NewInput(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	in.closers = append(in.closers, f)
	return in, nil
}

// Input is a possibly decompressed byte stream with look-ahead.
type Input struct {
	*bufio.Reader
	// src is what Reader buffers: the input itself, or for gzip the
	// inflater behind a read-ahead (ahead).
	src     io.Reader
	ahead   *readahead.Reader
	Gzipped bool
	closers []io.Closer
	// sizeHint is the bytes the stream will likely yield (0: unknown):
	// a regular file's size, or a gzip file's ISIZE trailer. Read sizes
	// its record lists from it; a wrong hint costs time, never a result.
	sizeHint int64
}

// smallGzip: a gzip file shorter than this is buffered in 64 KiB, not 1 MiB.
const smallGzip = 128 << 10

// inflateAheadAfter: a gzip stream is inflated on a goroutine of its own
// (readahead) once this many bytes have been read through the buffer, so
// that inflating and parsing overlap on two cores (measured 270 MB/s
// against 190); a small file never starts it. The sniff reads far less.
const inflateAheadAfter = 1 << 20

// NewInput wraps r, decompressing it when it starts with the gzip magic.
func NewInput(r io.Reader) (*Input, error) { return NewInputCPUs(r, 0) }

// NewInputCPUs is NewInput for an input read beside others: cpus is its
// share of the CPUs (0: GOMAXPROCS), which bounds the goroutines that
// inflate an indexed gzip's members (indexedGzip). Traces read at once
// share the cores already: a member reader each would only hold members.
func NewInputCPUs(r io.Reader, cpus int) (*Input, error) {
	if cpus <= 0 {
		cpus = runtime.GOMAXPROCS(0)
	}
	br := bufio.NewReaderSize(r, 256<<10)
	head, err := br.Peek(2)
	if len(head) == 0 {
		if err == nil || err == io.EOF {
			return nil, ErrEmpty
		}
		return nil, err
	}
	in := &Input{sizeHint: regularSize(r)}
	if len(head) == 2 && head[0] == gzipMagic[0] && head[1] == gzipMagic[1] {
		in.Gzipped = true
		in.sizeHint = gzipSizeHint(r, in.sizeHint)
		size := 1 << 20
		if _, err := br.Peek(smallGzip); err != nil {
			// A small file (a summary, a short log; a reduce reads
			// thousands): a small buffer. Peeked before an inflater
			// reads br, which the members' reader does on a goroutine.
			size = 64 << 10
		}
		if cpus > 2 && gzmembers.Indexed(br) {
			in.indexedGzip(br, min(cpus-1, maxInflaters))
		} else if err := in.oneStreamGzip(br); err != nil {
			return nil, err
		}
		in.Reader = bufio.NewReaderSize(in.src, size)
		if _, err := in.Reader.Peek(1); err != nil {
			in.Close()
			if err == io.EOF {
				return nil, ErrEmpty
			}
			return nil, err
		}
		return in, nil
	}
	in.Reader, in.src = br, r
	return in, nil
}

// oneStreamGzip inflates br as one gzip stream (any gzip file).
func (in *Input) oneStreamGzip(br *bufio.Reader) error {
	// One inflater, klauspost's, for every gzip input. pgzip (which
	// inflates ahead in its own goroutine) cost 15% more CPU than
	// inflating in place (1 GB: 1.19-1.29 s against 1.00-1.09 s), and
	// the trace reader, whose batches are read on a goroutine of their
	// own already, inflates in place (Direct).
	zr, err := gzip.NewReader(br)
	if err != nil {
		return fmt.Errorf("corrupt gzip: %w", err)
	}
	// zr holds nothing to release (its Close only reports its error), so
	// it is not closed: the read-ahead goroutine may still be inside it
	// when the Input is closed.
	in.ahead = readahead.New(&gzipErrReader{zr}, inflateAheadAfter)
	in.closers = append(in.closers, in.ahead)
	in.src = in.ahead
	return nil
}

// maxInflaters caps the goroutines inflating an indexed gzip file's
// members (see gzmembers); each holds a member of 1 MiB or so.
const maxInflaters = 8

// indexedGzip reads a gzip file whose members name their compressed size
// (the snippet writes them so): the members inflate on several cores at
// once (gzmembers), ahead of the reader, so no read-ahead goroutine is
// needed. On the 1 GB bench trace, 16-core Xeon, torchmem-bench's 3
// rounds: ops 0.63 s against 1.67 s as one stream (0.42 s as plain JSON),
// for 6.1 s of CPU against 3.8 s (8 inflaters share the cores with the
// parse); 4 cores 1.51 s against 2.09 s. With 2 CPUs or fewer it is read
// as one stream: inflating and parsing already fill both, and the
// members' hand-offs cost 5% more time there (NewInputCPUs's condition).
func (in *Input) indexedGzip(br *bufio.Reader, inflaters int) {
	zr := gzmembers.NewReader(br, inflaters)
	in.closers = append(in.closers, zr)
	in.src = &gzipErrReader{zr}
}

// Unbuffered reads the rest of the input: what the buffer holds (the
// bytes peeked at), then straight from what it buffers, the file or the
// inflater (in place, on the caller's goroutine, unless the read-ahead
// has started). A reader that fills large buffers of its own (Read, and
// torchmem-bench measuring decompression alone) saves a copy of every
// byte and a hand-off between goroutines.
func (in *Input) Unbuffered() io.Reader { return drainReader{in} }

type drainReader struct{ in *Input }

func (d drainReader) Read(p []byte) (int, error) {
	if d.in.Buffered() > 0 {
		return d.in.Reader.Read(p)
	}
	// An error the buffer met while filling comes first.
	if _, err := d.in.Reader.Read(nil); err != nil {
		return 0, err
	}
	if d.in.ahead != nil {
		// The inflater itself, unless the read-ahead already runs.
		return d.in.ahead.Direct().Read(p)
	}
	return d.in.src.Read(p)
}

// regularSize is r's size when r is a regular file, else 0.
func regularSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return 0
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
}

// maxGzipRatio caps the decompressed size a gzip file's trailer may
// claim, as a multiple of the file's size: ISIZE is four bytes anyone can
// write, and a hint of 4 GiB in a tiny file would have Read reserve record
// lists of hundreds of MB (address space, never written, yet an
// out-of-memory crash under a virtual memory limit). Measured on
// testdata's 150 .json.gz files: 5x to 30x for traces (the 1 GB bench
// trace 14x), 37x at most for any JSON; 128 leaves a margin of 3.5. A
// hint capped too low costs time (lists in chunks, copied at the end),
// never a result.
const maxGzipRatio = 128

// gzipSizeHint reads the size the snippet's indexed gzip names at its
// end (gzmembers.TotalSize), or else the ISIZE trailer of a gzip file of
// size bytes: the last member's decompressed size modulo 4 GiB; at most
// maxGzipRatio times size. It is only a hint (a multi-member file, a file over 4 GiB,
// a damaged or crafted trailer); 0 when it cannot be read or is below the
// compressed size, which no trace is.
func gzipSizeHint(r io.Reader, size int64) int64 {
	f, ok := r.(*os.File)
	if !ok || size < 18 {
		return 0
	}
	if n, ok := gzmembers.TotalSize(f, size); ok {
		return min(n, size*maxGzipRatio) // the snippet's indexed gzip
	}
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], size-4); err != nil {
		return 0
	}
	n := int64(binary.LittleEndian.Uint32(tail[:]))
	if n < size {
		return 0
	}
	return min(n, size*maxGzipRatio)
}

// ErrGzipTruncated means the gzip stream stopped early: the file was cut
// off (the process died while writing), not damaged.
var ErrGzipTruncated = errors.New("gzip stream ends early")

// gzipErrReader tells a cut-off gzip file (worth reading up to the cut)
// from a damaged one (an error).
type gzipErrReader struct{ r io.Reader }

func (g *gzipErrReader) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	switch {
	case err == nil || err == io.EOF:
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = ErrGzipTruncated
	default:
		err = fmt.Errorf("corrupt gzip: %w", err)
	}
	return n, err
}

// Close closes the decompressor and the file beneath it.
func (in *Input) Close() error {
	var first error
	for i := len(in.closers) - 1; i >= 0; i-- {
		if err := in.closers[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
