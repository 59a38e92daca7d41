package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// defaultMaxValueBytes is the readers' default cap on one value: one JSON
// trace event (or run of white space) and one pickle value.
const defaultMaxValueBytes = 64 << 20

// valueLimit is the --max-value-bytes flag: it sets the readers' caps on one
// value (chrometrace.MaxEventBytes, memtimeline.MaxPickleValueBytes), which
// keep a hostile file from costing unbounded memory.
type valueLimit struct{ n int }

func (v *valueLimit) String() string { return strconv.Itoa(v.n) }
func (v *valueLimit) Type() string   { return "bytes" }

// Set accepts a byte count with an optional binary suffix: 256MiB, 1GiB, 1G.
func (v *valueLimit) Set(s string) error {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := 1
	switch {
	case strings.HasSuffix(t, "K"):
		mult = 1 << 10
	case strings.HasSuffix(t, "M"):
		mult = 1 << 20
	case strings.HasSuffix(t, "G"):
		mult = 1 << 30
	}
	if mult > 1 {
		t = t[:len(t)-1]
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return fmt.Errorf("want a positive byte count such as 268435456 or 256MiB, got %q", s)
	}
	v.set(n * mult)
	return nil
}

func (v *valueLimit) set(n int) {
	v.n = n
	chrometrace.MaxEventBytes = n
	memtimeline.MaxPickleValueBytes = n
}

// addLimitFlags adds --max-value-bytes to every command, starting from the
// default each time a command tree is built.
func addLimitFlags(root *cobra.Command) {
	v := &valueLimit{}
	v.set(defaultMaxValueBytes)
	root.PersistentFlags().Var(v, "max-value-bytes",
		"largest single value a reader accepts: one trace event, one run of white space, one pickle string (e.g. 256MiB)")
}
