package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/cmd/internal/escape"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/internal/crash"
)

// Exit codes are part of the interface: CI jobs branch on them.
const (
	exitOK       = 0
	exitFindings = 1
	exitBadInput = 2
	// exitBug: torchmem crashed (a recovered panic). Never the input's
	// fault, and not 2, so that CI tells a bug from a bad file.
	exitBug = 3
)

// exitError carries an exit code through cobra's RunE. Silent errors have
// already printed what the user needs to know.
type exitError struct {
	code   int
	err    error
	silent bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// badInput marks an error caused by the user's files or arguments (exit 2).
func badInput(err error) error { return &exitError{code: exitBadInput, err: err} }

// findings ends a command that has printed its findings with exit code 1.
func findings() error { return &exitError{code: exitFindings, silent: true} }

func main() {
	stopProfiles := startProfiles()
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	stopProfiles()
	os.Exit(code)
}

// run executes the command line and returns the process exit code; tests
// call it directly.
func run(args []string, stdout, stderr io.Writer) (code int) {
	// Everything printed goes through the terminal filter: names from the
	// inputs cannot reach a terminal as control sequences, whatever the
	// command or format (see package escape).
	out, errw := escape.NewTerminalWriter(stdout), escape.NewTerminalWriter(stderr)
	defer out.Flush()  //nolint:errcheck
	defer errw.Flush() //nolint:errcheck
	stdout, stderr = out, errw
	root := newRootCmd()
	// Text output (--format text) wraps at the width (termWidth) with a
	// hanging indent; JSON, CSV, SARIF, Markdown, folded stacks and what
	// commands without --format print (the snippet's Python) pass as they
	// are.
	var wrapped *report.WrapWriter
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		f, folded := cmd.Flags().Lookup("format"), cmd.Flags().Lookup("folded")
		if f != nil && (f.Value.String() == formatText || f.Value.String() == formatTable) && (folded == nil || folded.Value.String() != "true") {
			wrapped = report.NewWrapWriter(cmd.OutOrStdout(), termWidth())
			cmd.SetOut(wrapped)
		}
		return nil
	}
	defer func() {
		if wrapped != nil {
			wrapped.Flush() //nolint:errcheck // the terminal writer's flush reports
		}
	}()
	// A panic is a bug in torchmem, whatever the input: say so, name the
	// files being read, and exit 3 (see exitBug).
	var inputs []string
	defer func() {
		if b := crash.Recovered(recover(), ""); b != nil {
			code = reportBug(stderr, b, inputs)
		}
	}()
	pre := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, a []string) error {
		inputs = a
		if bugHook != nil {
			bugHook(a)
		}
		return pre(cmd, a)
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.silent && ee.err != nil {
			fmt.Fprintln(stderr, "torchmem:", ee.err)
		}
		return ee.code
	}
	// Anything else out of cobra is a usage problem (unknown flag, bad args).
	fmt.Fprintln(stderr, "torchmem:", err)
	fmt.Fprintln(stderr, "Run 'torchmem --help' for usage.")
	return exitBadInput
}

// bugHook, set by tests only, runs before every command: a test makes it
// panic to see the crash handling end to end.
var bugHook func(args []string)

// reportBug prints a recovered panic as what it is, a bug in torchmem,
// naming the file it was reading (or the command's inputs), and returns
// exitBug.
func reportBug(stderr io.Writer, b *crash.Bug, inputs []string) int {
	where := b.File
	if where == "" && len(inputs) > 0 {
		where = strings.Join(inputs, " ")
	}
	if where != "" {
		where = " while reading " + escape.Terminal(where)
	}
	fmt.Fprintf(stderr, "torchmem: bug in torchmem%s: %s\n", where, escape.Terminal(fmt.Sprint(b.Value)))
	fmt.Fprintln(stderr, "torchmem: this is torchmem's fault, not the input's (exit code 3); please report it with the stack below and, if you can, the file:")
	for _, l := range strings.Split(strings.TrimRight(string(b.Stack), "\n"), "\n") {
		fmt.Fprintln(stderr, escape.Terminal(l))
	}
	return exitBug
}
