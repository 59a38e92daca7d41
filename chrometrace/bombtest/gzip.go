package bombtest

import (
	"bytes"

	"github.com/klauspost/compress/gzip"
)

// GzipBomb returns head + n bytes of fill (n a multiple of 1 MiB) + tail
// as a multi-member gzip: copies of one compressed MiB of fill between a
// first and a last member, so 10 GB cost ~10 MB and no time to make.
func GzipBomb(head []byte, fill byte, n int64, tail []byte) []byte {
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b) // a bytes.Buffer does not fail
		zw.Close()
		return buf.Bytes()
	}
	out := member(head)
	m := member(bytes.Repeat([]byte{fill}, 1<<20))
	for i := int64(0); i < n>>20; i++ {
		out = append(out, m...)
	}
	return append(out, member(tail)...)
}
