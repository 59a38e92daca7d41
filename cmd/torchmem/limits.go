package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
)

// defaultMaxValueBytes is the readers' default cap on one value: one JSON
// trace event (or run of white space) and one pickle value.
const defaultMaxValueBytes = 64 << 20

// valueLimit is the --max-value-bytes flag: it sets the readers' caps on one
// value (chrometrace.MaxEventBytes, snapshot.MaxValueBytes), which
// keep a hostile file from costing unbounded memory.
type valueLimit struct{ n int }

func (v *valueLimit) String() string { return strconv.Itoa(v.n) }
func (v *valueLimit) Type() string   { return "bytes" }

// Set accepts a byte count with an optional binary suffix: 256MiB, 1GiB, 1G.
func (v *valueLimit) Set(s string) error {
	n, err := parseByteCount(s, 1<<40)
	if err != nil {
		return err
	}
	v.set(n)
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

func (v *valueLimit) set(n int) {
	v.n = n
	setCap(&chrometrace.MaxEventBytes, n)
	setCap(&snapshot.MaxValueBytes, n)
}

// setCap sets a reader's cap, writing only a change: commands that run
// side by side in one process (the tests) with the default caps then only
// read the shared variables, and do not race.
func setCap[T comparable](p *T, v T) {
	if *p != v {
		*p = v
	}
}

// addLimitFlags adds --max-value-bytes to every command, starting from the
// default each time a command tree is built.
func addLimitFlags(root *cobra.Command) {
	v := &valueLimit{}
	v.set(defaultMaxValueBytes)
	root.PersistentFlags().Var(v, "max-value-bytes",
		"largest single value a reader accepts: one trace event, one run of white space, one pickle string (e.g. 256MiB)")
	setCap(&memtimeline.MaxInputBytes, memtimeline.DefaultMaxInputBytes)
	setCap(&memtimeline.MaxRecords, memtimeline.DefaultMaxRecords)
	setCap(&memtimeline.MaxSeries, memtimeline.DefaultMaxSeries)
	root.PersistentFlags().Var(&capFlag{set: func(n int) { memtimeline.MaxInputBytes = int64(n) }, n: int(memtimeline.DefaultMaxInputBytes), max: 1 << 50},
		"max-input-bytes", "largest input (after decompression) read from a snapshot, timeline, nvidia-smi or per-step log (e.g. 64GiB)")
	setCap(&chrometrace.MaxEvents, chrometrace.DefaultMaxEvents)
	setCap(&chrometrace.MaxMemoryEvents, chrometrace.DefaultMaxMemoryEvents)
	root.PersistentFlags().Var(&capFlag{set: func(n int) { chrometrace.MaxEvents = int64(n) }, n: int(chrometrace.DefaultMaxEvents), max: 1 << 40},
		"max-events", "most events read from one trace, 64M by default (an 18 GB trace; e.g. 256M)")
	root.PersistentFlags().Var(&capFlag{set: func(n int) { chrometrace.MaxMemoryEvents = n }, n: chrometrace.DefaultMaxMemoryEvents, max: 1 << 36},
		"max-memory-events", "most [memory] events read from one trace; about 250 bytes of memory each in analyze and report (e.g. 16M)")
	root.PersistentFlags().Var(&capFlag{set: func(n int) {
		memtimeline.MaxRecords = n
		memtimeline.MaxSeries = max(n/64, memtimeline.DefaultMaxSeries)
	}, n: memtimeline.DefaultMaxRecords, max: 1 << 34},
		"max-records", "most points of a memory timeline, rows of an nvidia-smi log or lines of a per-step log read from one input (e.g. 16M)")
}

// capFlag is a reader cap given on the command line as a count with an
// optional binary suffix.
type capFlag struct {
	n, max int
	set    func(int)
}

func (c *capFlag) String() string { return strconv.Itoa(c.n) }
func (c *capFlag) Type() string   { return "count" }
func (c *capFlag) Set(s string) error {
	n, err := parseByteCount(s, int64(c.max))
	if err != nil {
		return err
	}
	c.n = n
	c.set(n)
	return nil
}
