package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/rules"
)

// Every command that answers is the same five steps:
//
//	flags -> question (what to read, rules.Options, the gate)
//	      -> answer: one load (loadInputs), one rules.Evaluate
//	      -> report.New(ev, view) -> report.Generate
//	      -> exitOf(ev, gate)
//
// This file holds the middle and the end; the commands' files hold their
// flags and their view.

// question is what a command asks of its inputs.
type question struct {
	// command names the command in messages ("ops reads ...").
	command string
	// kinds are the kinds the command reads (nil: every kind); fallback the
	// kind an unrecognized file named on the command line is parsed as, so
	// that its parser says what is wrong (load.Options).
	kinds    []load.Kind
	fallback load.Kind
	// trace configures the trace reader (ops keeps no Python frames);
	// its Limits are limits below.
	trace chrometrace.ReadOptions
	// limits are the readers' caps (the --max-* flags: limitsOf).
	limits chrometrace.Limits
	// bounded: many inputs are read into summaries to bound memory (only
	// where summaries give the same answer: default options).
	bounded bool
	// noCharts: the command draws no chart, so a summary's charts are let
	// go as each is read.
	noCharts bool
	// tune, when set, adjusts the loader's options last, for a command
	// that keeps less than the inputs (summarize: a shard's part, each
	// input's summary written as it is read, one bar of inputs).
	tune func(*load.Options)
	// check, when set, looks at the loaded inputs before they are
	// evaluated and refuses what the command cannot answer (bad input).
	check func([]*rules.Input) error
	// options are the evaluation's.
	options rules.Options
	// gate decides the exit status.
	gate gate
}

// gate is which part of the evaluation decides a command's exit status.
type gate int

const (
	// gateErrors is the one policy (exitPolicy): 1 when a finding is at
	// error severity, whether a rule's or a diff gate's; inputs none of
	// which records memory are bad input (a gate never passes what it
	// could not measure).
	gateErrors gate = iota
	// gateFragmented is frag's: 1 when a run's fragmentation verdict is
	// FRAGMENTED (the frag rules themselves are warnings by default).
	gateFragmented
	// gateNone: the command shows what it found and exits 0 (annotate,
	// ops, stacks, snapshot).
	gateNone
)

// answer loads args (for diff, q.options.Compare set: BASE and HEAD, each
// apart) and evaluates them once with q's options.
func answer(stderr io.Writer, args []string, q question) (*rules.Evaluation, error) {
	o := q.options
	var ins []*rules.Input
	var err error
	if o.Compare != nil {
		c := *o.Compare
		if c.Base, err = loadInputs(stderr, args[:1], q); err != nil {
			return nil, err
		}
		if ins, err = loadInputs(stderr, args[1:], q); err != nil {
			return nil, err
		}
		c.BaseArg, c.HeadArg = args[0], args[1]
		o.Compare = &c
	} else if ins, err = loadInputs(stderr, args, q); err != nil {
		return nil, err
	}
	if q.check != nil {
		if err := q.check(ins); err != nil {
			return nil, badInput(err)
		}
	}
	ev := rules.Evaluate(ins, o)
	for _, m := range ev.Unpaired {
		warn(stderr, "%s", m)
	}
	for _, m := range ev.Messages {
		note(stderr, "%s", m)
	}
	switch {
	case q.gate == gateErrors && ev.Unmeasured != nil:
		return nil, badInput(ev.Unmeasured) // a gate never passes what it could not measure
	case o.Compare != nil && len(ev.Diffs) == 0:
		return nil, badInput(fmt.Errorf("%s and %s have nothing in common to compare (traces pair with traces, snapshots with snapshots, rank with rank)", args[0], args[1]))
	}
	return ev, nil
}

// exitOf is the command's exit status from its evaluation and gate: nil
// (0) or findings (1).
func exitOf(ev *rules.Evaluation, g gate) error {
	failed := false
	switch g {
	case gateErrors:
		failed = ev.ExitCode() == rules.ExitFindings
	case gateFragmented:
		failed = ev.Fragmented()
	}
	if failed {
		return findings()
	}
	return nil
}

// warn, note and say are the commands' messages on stderr, beside the
// answer (the answer itself is the report package's to print).
func warn(stderr io.Writer, format string, a ...any) {
	fmt.Fprintf(stderr, "torchmem: warning: "+format+"\n", a...)
}

func note(stderr io.Writer, format string, a ...any) {
	fmt.Fprintf(stderr, "torchmem: note: "+format+"\n", a...)
}

// say tells the user why the command ends as it does.
func say(stderr io.Writer, format string, a ...any) {
	fmt.Fprintf(stderr, "torchmem: "+format+"\n", a...)
}

// kindNames names kinds in a sentence: "a trace or a snapshot".
func kindNames(ks []load.Kind) string {
	var s []string
	for _, k := range ks {
		s = append(s, "a "+string(k))
	}
	return strings.Join(s, " or ")
}
