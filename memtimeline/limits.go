package memtimeline

import (
	"io"

	"github.com/torchmem/torchmem/chrometrace"
)

// The caps on what one input may make a reader read and hold are
// chrometrace.Limits, passed to each reader's ReadLimited (the command
// line sets them: --max-input-bytes, --max-records); past one a reader
// stops with a *chrometrace.CountLimitError.

// RecordsError is the error of a reader that reached the records cap,
// limit (what: "timeline points", "per-step records", ...).
func RecordsError(what string, limit int) error {
	return &chrometrace.CountLimitError{What: what, Limit: int64(limit), Flag: "max-records"}
}

// SeriesError is the error of a reader that reached the series cap, limit
// (what: "distinct GPUs", "distinct devices").
func SeriesError(what string, limit int) error {
	return &chrometrace.CountLimitError{What: what, Limit: int64(limit), Flag: "max-records"}
}

// LimitInput returns r reading at most max bytes (0: the default,
// chrometrace.DefaultMaxInputBytes); past them it fails with a
// *chrometrace.CountLimitError (not io.EOF, so that a capped input is
// never taken for a complete or a truncated one).
func LimitInput(r io.Reader, max int64) io.Reader {
	if max <= 0 {
		max = chrometrace.DefaultMaxInputBytes
	}
	return &capReader{r: r, left: max, limit: max}
}

type capReader struct {
	r           io.Reader
	left, limit int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// At the cap: fine if the input ends here too.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n == 0 {
			return 0, err
		}
		return 0, &chrometrace.CountLimitError{What: "decompressed bytes", Limit: c.limit, Flag: "max-input-bytes"}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
