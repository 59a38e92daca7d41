package gzmembers

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/flate"
)

// MemberSize is the input a Writer puts in each member, as the snippet
// does: 1 MiB members cost about 1% in size against one stream (64 KiB
// ones, BGZF's, 13% on a trace) and keep a reader's members in flight
// small.
const MemberSize = 1 << 20

// Writer writes an indexed gzip file: members of MemberSize bytes of
// input, each naming its compressed size (see the package comment), and
// an empty member last that names the total (TotalSize). Any gzip reader
// reads the file as one stream. It writes what the snippet
// writes, for tests and for torchmem-bench's inputs.
type Writer struct {
	w          io.Writer
	fw         *flate.Writer
	buf        []byte
	comp       bytes.Buffer // a member's compressed data
	memberSize int
	total      int64
	err        error
}

// NewWriter writes members of MemberSize at a flate level.
func NewWriter(w io.Writer, level int) (*Writer, error) {
	return NewWriterSize(w, level, MemberSize)
}

// NewWriterSize writes members of memberSize bytes of input.
func NewWriterSize(w io.Writer, level, memberSize int) (*Writer, error) {
	z := &Writer{w: w, memberSize: max(memberSize, 1)}
	fw, err := flate.NewWriter(&z.comp, level)
	if err != nil {
		return nil, err
	}
	z.fw = fw
	return z, nil
}

func (z *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && z.err == nil {
		k := min(len(p), z.memberSize-len(z.buf))
		z.buf = append(z.buf, p[:k]...)
		z.total += int64(k)
		p = p[k:]
		if len(z.buf) == z.memberSize {
			z.member()
		}
	}
	if z.err != nil {
		return 0, z.err
	}
	return n, nil
}

// member writes the buffered input as one member.
func (z *Writer) member() {
	z.comp.Reset()
	z.fw.Reset(&z.comp)
	if _, err := z.fw.Write(z.buf); err != nil {
		z.err = err
		return
	}
	if err := z.fw.Close(); err != nil {
		z.err = err
		return
	}
	var hdr [20]byte
	copy(hdr[:], []byte{0x1f, 0x8b, 8, flagExtra, 0, 0, 0, 0, 0, 255, 8, 0, 'M', 'Z', 4, 0})
	binary.LittleEndian.PutUint32(hdr[16:], uint32(z.comp.Len()))
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[:], crc32.ChecksumIEEE(z.buf))
	binary.LittleEndian.PutUint32(trailer[4:], uint32(len(z.buf)))
	for _, b := range [][]byte{hdr[:], z.comp.Bytes(), trailer[:]} {
		if _, err := z.w.Write(b); err != nil {
			z.err = err
			return
		}
	}
	z.buf = z.buf[:0]
}

// Close writes the last member, then the empty member that names the
// total (see TotalSize); it does not close the underlying writer.
func (z *Writer) Close() error {
	if z.err == nil && len(z.buf) > 0 {
		z.member()
	}
	if z.err == nil {
		var end [totalMemberLen]byte
		copy(end[:], totalMemberHead)
		binary.LittleEndian.PutUint64(end[24:], uint64(z.total))
		copy(end[32:], []byte{3, 0}) // an empty final deflate block
		_, z.err = z.w.Write(end[:])
	}
	return z.err
}
