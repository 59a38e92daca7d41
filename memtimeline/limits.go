package memtimeline

import (
	"fmt"
	"io"
)

// Caps on what one input may make a reader read and hold, whatever the
// input claims or repeats. Each holds a real input many times over (the
// largest recorded export_memory_timeline has 53k points; 2M rows are an
// nvidia-smi log of 8 GPUs sampled every second for 3 days, 2M lines a
// per-step log of 2M steps), and together they keep a reader's memory
// under 1 GiB on hostile input (measured: 2M step lines 0.6 GB, where 4M
// took 1.2 GB). The
// command line sets them (--max-input-bytes, --max-records); a reader that
// reaches one stops with a *LimitError.
var (
	// MaxInputBytes caps the decompressed bytes read from one input
	// (LimitInput); a gzip bomb expands 1000-fold.
	MaxInputBytes int64 = DefaultMaxInputBytes
	// MaxRecords caps the points of an export_memory_timeline file, the
	// rows kept from an nvidia-smi log (a longer one is thinned, up to 8
	// times) and the lines of a per-step log.
	MaxRecords = DefaultMaxRecords
	// MaxSeries caps the distinct GPUs of an nvidia-smi log and the
	// distinct devices of a per-step log.
	MaxSeries = DefaultMaxSeries
)

// The caps' defaults.
const (
	DefaultMaxInputBytes int64 = 16 << 30
	DefaultMaxRecords          = 2 << 20
	DefaultMaxSeries           = 1 << 16
)

// LimitError says that an input went past one of the caps above.
type LimitError struct {
	What  string // "decompressed bytes", "timeline points", ...
	Limit int64
	Flag  string // the torchmem flag that raises the cap
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("more than %d %s, the cap on one input (--%s raises it)", e.Limit, e.What, e.Flag)
}

// RecordsError is the *LimitError of a reader that reached MaxRecords
// (what: "timeline points", "per-step records", ...).
func RecordsError(what string) error {
	return &LimitError{What: what, Limit: int64(MaxRecords), Flag: "max-records"}
}

// SeriesError is the *LimitError of a reader that reached MaxSeries
// (what: "distinct GPUs", "distinct devices").
func SeriesError(what string) error {
	return &LimitError{What: what, Limit: int64(MaxSeries), Flag: "max-records"}
}

// LimitInput returns r reading at most MaxInputBytes bytes; past them it
// fails with a *LimitError (not io.EOF, so that a capped input is never
// taken for a complete or a truncated one).
func LimitInput(r io.Reader) io.Reader {
	return &capReader{r: r, left: MaxInputBytes, limit: MaxInputBytes}
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
		return 0, &LimitError{What: "decompressed bytes", Limit: c.limit, Flag: "max-input-bytes"}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
