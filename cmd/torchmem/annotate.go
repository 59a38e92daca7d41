package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/chrometrace/splice"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newAnnotateCmd) }

func newAnnotateCmd() *cobra.Command {
	var output, rulesFile string
	cmd := &cobra.Command{
		Use:   "annotate TRACE -o OUT",
		Short: "Write the trace again with memory tracks and finding markers, for Perfetto or chrome://tracing",
		Long: `Writes the same Kineto trace with memory added where trace viewers show it,
beside the kernels and operators:

  - counter tracks of allocated and reserved bytes per GPU
    ("cuda:0 allocated (torchmem)"), in the GPU's own process;
  - for a leak, a counter track of the bytes it kept so far, step by step
    ("leak 1 kept (...)"), and a marker at each step that kept memory;
  - markers for out-of-memory errors, reserved memory given back by the
    allocator (a cudaMalloc retry, empty_cache()), and the largest idle gap
    of the steps the rules flag.

Every original event is kept as it was, byte for byte: the added events
(category "torchmem") go at the end of traceEvents. OUT is gzipped when
its name ends in .gz. Open it at https://ui.perfetto.dev or chrome://tracing.`,
		Example: `  torchmem annotate trace.json.gz -o trace.annotated.json.gz
  torchmem annotate rank0.pt.trace.json -o rank0.memory.json --rules torchmem.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAnnotate(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], output, rulesFile, limitsOf(cmd))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "the trace to write (gzipped when it ends in .gz)")
	cmd.Flags().StringVar(&rulesFile, "rules", "", "YAML rules config for the findings marked (as for check)")
	return cmd
}

func runAnnotate(stdout, stderr io.Writer, trace, output, rulesFile string, lim chrometrace.Limits) error {
	if output == "" {
		return badInput(errors.New("say where to write the annotated trace: -o OUT (.json or .json.gz)"))
	}
	if trace == load.Stdin {
		return badInput(errors.New("annotate reads the trace twice (to analyze it, then to copy it): name a file, not -"))
	}
	if st, err := os.Stat(trace); err == nil && st.IsDir() {
		return badInput(fmt.Errorf("%s: is a directory; annotate writes one trace: name one trace file", trace))
	} else if err == nil && !st.Mode().IsRegular() {
		// A FIFO gives its data once: the second read would block.
		return badInput(fmt.Errorf("%s: not a regular file (a FIFO or device); annotate reads the trace twice (to analyze it, then to copy it): save it to a file first", trace))
	}
	if err := checkOutput(output, []string{trace}); err != nil {
		return err
	}
	rs, _, err := loadRules(rulesFile)
	if err != nil {
		return err
	}
	q := question{command: "annotate", kinds: []load.Kind{load.Trace}, fallback: load.Trace, gate: gateNone, limits: lim,
		options: rules.Options{Rules: rs, Tracks: true},
		check: func(ins []*rules.Input) error {
			in := ins[0]
			if !in.Has(rules.SourceTrace) {
				return fmt.Errorf("%s: not a trace", trace)
			}
			if in.Trace.Truncated != nil {
				return fmt.Errorf("%s: the trace is truncated at byte %d; annotate copies a complete trace only (the other commands read what is there)", trace, in.Trace.Truncated.Offset)
			}
			return nil
		}}
	ev, err := answer(stderr, []string{trace}, q)
	if err != nil {
		return err
	}
	a, err := report.NewTracks(&ev.Tables[0], ev.Findings)
	if err != nil {
		return fmt.Errorf("%s: %w", trace, err)
	}
	src, err := reopen(stderr, trace, q)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := writeAnnotated(src, output, a.Events)
	if err != nil {
		return err
	}
	if a.Counters == 0 {
		warn(stderr, "%s has no GPU memory events, so no memory tracks were added: record with profile_memory=True", trace)
	}
	return report.Generate(stdout, report.New(ev, report.Options{View: report.ViewAnnotated, Output: output, Annotated: &report.Annotated{Tracks: a, Trace: trace, Bytes: st.Bytes, Added: st.Added}}))
}

// writeAnnotated copies the trace src into output with events added,
// gzipped when output ends in .gz; a failed write leaves no output.
func writeAnnotated(src *load.Reader, output string, events [][]byte) (st splice.Stats, err error) {
	trace := src.Path
	f, err := os.Create(output)
	if err != nil {
		return st, badInput(fmt.Errorf("-o %s: %w", output, err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(output)
		}
	}()
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(output, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	st, err = splice.Events(w, src, events)
	if err != nil {
		return st, badInput(fmt.Errorf("%s: %w", trace, err))
	}
	if zw != nil {
		if err = zw.Close(); err != nil {
			return st, fmt.Errorf("-o %s: %w", output, err)
		}
	}
	if err = f.Close(); err != nil {
		return st, fmt.Errorf("-o %s: %w", output, err)
	}
	return st, nil
}
