package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// limitFlag is one --max-* flag: a cap of the readers (a field of the
// chrometrace.Limits the loader passes to every reader), given as a count
// with an optional binary suffix. The caps keep a hostile file from
// costing unbounded memory.
type limitFlag struct {
	lim *chrometrace.Limits
	n   int
	max int64
	typ string // "bytes" or "count", as --help shows it
	set func(l *chrometrace.Limits, n int)
}

func (f *limitFlag) String() string { return strconv.Itoa(f.n) }
func (f *limitFlag) Type() string   { return f.typ }

// Set accepts a count with an optional binary suffix: 256MiB, 1GiB, 1G.
func (f *limitFlag) Set(s string) error {
	n, err := parseByteCount(s, f.max)
	if err != nil {
		if f.typ == "count" {
			return fmt.Errorf("want a positive count up to %d such as 16777216 or 16M, got %q", f.max, s)
		}
		return err
	}
	f.n = n
	f.set(f.lim, n)
	return nil
}

// parseByteCount reads a positive size in the one size syntax
// (memtimeline.ParseBytes: 268435456, 256MiB, 1G), at most max.
func parseByteCount(s string, max int64) (int, error) {
	n, err := memtimeline.ParseBytes(s)
	if err != nil || n <= 0 || n > max {
		return 0, fmt.Errorf("want a positive byte count up to %d such as 268435456 or 256MiB, got %q", max, s)
	}
	return int(n), nil
}

// addLimitFlags adds the readers' caps to every command (persistent
// flags of root), each starting at its default; limitsOf reads them back.
func addLimitFlags(root *cobra.Command) {
	lim := &chrometrace.Limits{}
	*lim = lim.WithDefaults()
	add := func(name, typ, usage string, n int, max int64, set func(l *chrometrace.Limits, n int)) {
		root.PersistentFlags().Var(&limitFlag{lim: lim, n: n, max: max, typ: typ, set: set}, name, usage)
	}
	add("max-value-bytes", "bytes", "largest single value a reader accepts: one trace event, one run of white space, one pickle string (e.g. 256MiB)",
		lim.ValueBytes, 1<<40, func(l *chrometrace.Limits, n int) { l.ValueBytes = n })
	add("max-input-bytes", "count", "largest input (after decompression) read from a snapshot, timeline, nvidia-smi or per-step log (e.g. 64GiB)",
		int(lim.InputBytes), 1<<50, func(l *chrometrace.Limits, n int) { l.InputBytes = int64(n) })
	add("max-events", "count", "most events read from one trace, 64M by default (an 18 GB trace; e.g. 256M)",
		int(lim.Events), chrometrace.MaxIndexedEvents, func(l *chrometrace.Limits, n int) { l.Events = int64(n) })
	add("max-memory-events", "count", "most [memory] events read from one trace; about 250 bytes of memory each in analyze and report (e.g. 16M)",
		lim.MemoryEvents, chrometrace.MaxIndexedEvents, func(l *chrometrace.Limits, n int) { l.MemoryEvents = n })
	add("max-records", "count", "most points of a memory timeline, rows of an nvidia-smi log or lines of a per-step log read from one input (e.g. 16M)",
		lim.Records, 1<<34, func(l *chrometrace.Limits, n int) {
			l.Records = n
			l.Series = 0 // follows the records cap (Limits.Series)
			*l = l.WithDefaults()
		})
}

// limitsOf is the readers' caps as cmd's command line set them (the
// defaults where it did not).
func limitsOf(cmd *cobra.Command) chrometrace.Limits {
	if fl := cmd.Root().PersistentFlags().Lookup("max-value-bytes"); fl != nil {
		if f, ok := fl.Value.(*limitFlag); ok {
			return *f.lim
		}
	}
	return chrometrace.Limits{}.WithDefaults()
}
