package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/escape"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/internal/crash"
	"github.com/torchmem/torchmem/rules/digest"
	"golang.org/x/sync/errgroup"
)

func init() { subcommands = append(subcommands, newSummarizeCmd) }

type summarizeOptions struct {
	limits chrometrace.Limits // the readers' caps (the --max-* flags)
	output string
	jobs   int
	shard  string
}

func newSummarizeCmd() *cobra.Command {
	o := &summarizeOptions{}
	cmd := &cobra.Command{
		Use:   "summarize INPUT... -o DIR",
		Short: "Write a small summary of each input, for analysing many ranks (or another machine) later",
		Long: `Reads each input (traces, allocator snapshots, per-step logs, nvidia-smi
logs; directories expand to the files in them) and writes one compact summary
per input into DIR, named after it: <name>.summary.json.gz.

A summary holds what the multi-input commands need, computed where the file
is: the verdict (leak evidence with bytes per step, OOMs, fragmentation, the
peak and what holds it), the per-step survivors and leak suspects with their
stacks and kinds, the fragmentation figures, the operator table's top rows,
the memory timeline downsampled with every peak kept, the findings of the
built-in rules, and the run's metadata (rank, world size, GPU). It is
typically well under 1% of a trace, and versioned (schema_version).

leaks, analyze, check, report and diff read summaries like the files they
summarize and give the same verdict per run and rank and the same bytes per
step. What a summary cannot answer needs the file itself: ops and stacks
(every operator and allocation site), other thresholds (--rules,
--min-bytes-per-step), frag and snapshot detail.

This is the map step for a job too large for one machine: run it where the
traces are (one cluster task per shard of ranks, see examples/cluster), copy
the summaries to one place, and run leaks, analyze, check or report on the
directory of summaries. Inputs are read several at once (--jobs, one per CPU
by default); each input's raw data is dropped once its summary is written, so
memory stays near that of the --jobs largest inputs, whatever their number.
On a terminal a progress bar goes to stderr.

Exit status: 0 all summaries written, 2 bad input (a named file that cannot be
read; a bad file found in a directory is skipped with a warning).`,
		Example: `  torchmem summarize traces/ -o summaries/
  torchmem summarize rank*.pt.trace.json.gz --jobs 4 -o /shared/job42/summaries
  torchmem summarize /shared/job42/traces --shard 3/16 -o /shared/job42/summaries   # task 3 of 16
  torchmem leaks summaries/            # the cross-rank verdict from the summaries
  torchmem report summaries/ -o report.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limits = limitsOf(cmd)
			return runSummarize(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "directory to write the summaries into (created if missing)")
	f.IntVarP(&o.jobs, "jobs", "j", 0, "inputs read at once (0 = one per CPU); memory grows with it")
	f.StringVar(&o.shard, "shard", "", "I/N: summarize only the inputs whose rank (from the path: rank3_..., rank3/...) is I modulo N, for task I of an N-task array job; no rank counts as 0")
	cmd.MarkFlagRequired("output")
	cmd.MarkFlagDirname("output")
	return cmd
}

// summarized is what summarizing one input did.
type summarized struct {
	src      load.Source
	out      string
	inBytes  int64
	outBytes int64
	kind     load.Kind
	skip     bool
	err      error
	warnings []string
	bug      *crash.Bug
}

func runSummarize(stdout, stderr io.Writer, args []string, o *summarizeOptions) error {
	if o.output == "" {
		return badInput(errors.New("summarize needs -o DIR"))
	}
	if o.jobs < 0 {
		return badInput(fmt.Errorf("--jobs %d: want 0 (one per CPU) or more", o.jobs))
	}
	srcs, err := load.Expand(args)
	if err != nil {
		return badInput(err)
	}
	if st, err := os.Stat(o.output); err == nil && !st.IsDir() {
		return badInput(fmt.Errorf("-o %s: not a directory", o.output))
	}
	if err := os.MkdirAll(o.output, 0o755); err != nil {
		return badInput(load.FileError(o.output, err))
	}
	paths := make([]string, len(srcs))
	for i, s := range srcs {
		paths[i] = s.Path
	}
	names := digest.Names(paths)
	if o.shard != "" {
		sh, err := parseShard(o.shard)
		if err != nil {
			return badInput(err)
		}
		if srcs, names = sh.pick(srcs, names); len(srcs) == 0 {
			report.EmptyShard(stdout, sh.Index, sh.Count)
			return nil
		}
	}
	jobs := o.jobs
	if jobs == 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	// The inputs' records are most of the heap and are dropped after each
	// summary: collect more often than the default so that the peak stays
	// near the inputs in flight.
	analysisPhase()

	bar := summarizeProgress(len(srcs))
	opts := load.Options{
		Kinds:    []load.Kind{load.Trace, load.Snapshot, load.Steps, load.SMI, load.Timeline, load.Summary},
		Fallback: load.Trace,
		Command:  "summarize",
		Stdin:    stdin,
		Limits:   o.limits,
	}
	res := make([]summarized, len(srcs))
	var g errgroup.Group // a failed input is a result here, not the group's error
	g.SetLimit(jobs)
	for i, s := range srcs {
		g.Go(func() error {
			if bug := crash.Run(s.Path, func() { res[i] = summarizeOne(s, filepath.Join(o.output, names[i]), &opts) }); bug != nil {
				res[i].bug = bug
			}
			bar.Add(1)
			return nil
		})
	}
	g.Wait() //nolint:errcheck // every goroutine returns nil
	bar.Finish()
	for _, r := range res {
		if r.bug != nil {
			panic(r.bug) // to the command's top: a bug, not a bad file
		}
	}

	var firstErr error
	written := 0
	for _, r := range res {
		for _, w := range r.warnings {
			warn(stderr, "%s: %s", escape.Terminal(r.src.Path), escape.Terminal(w))
		}
		switch {
		case r.err != nil && r.src.Named():
			if firstErr == nil {
				firstErr = r.err
			}
		case r.err != nil:
			warn(stderr, "skipping %s", escape.Terminal(r.err.Error()))
		case r.skip:
		default:
			written++
			report.SummaryWritten(stdout, r.src.Path, r.out, string(r.kind), r.outBytes, r.inBytes)
		}
	}
	if firstErr != nil {
		return badInput(firstErr)
	}
	if written == 0 {
		return badInput(errors.New("nothing to summarize in the inputs (traces, snapshots, step logs, nvidia-smi logs)"))
	}
	return nil
}

// summarizeOne reads one input, writes its summary to out and drops it.
func summarizeOne(src load.Source, out string, o *load.Options) summarized {
	r := summarized{src: src, out: out}
	if src.Path != load.Stdin {
		if st, err := os.Stat(src.Path); err == nil {
			r.inBytes = st.Size()
			if ost, err := os.Stat(out); err == nil && os.SameFile(st, ost) {
				r.err = &load.Error{Path: src.Path, Err: errors.New("its summary would overwrite it: write the summaries elsewhere (-o)")}
				return r
			}
		}
	}
	// A summary found in a directory (the map's output folder) is passed
	// over as a kind summarize does not read; one named is an error.
	f, skip, err := load.Read(src, o)
	if err != nil || skip {
		r.err, r.skip = err, skip
		return r
	}
	r.kind = f.Kind
	r.warnings = f.Warnings
	in, err := ruleInput(f)
	if err != nil {
		r.err = err
		return r
	}
	s := digest.Make(in, r.inBytes, version, f.Warnings)
	f, in = nil, nil // the raw records go with the next collection
	r.outBytes, r.err = writeSummaryFile(s, out)
	if r.err != nil {
		r.err = load.FileError(out, r.err)
	}
	return r
}

// writeSummaryFile writes s to path through a temporary file renamed into
// place, so that a reader (or a killed task) never sees half a summary.
func writeSummaryFile(s *digest.File, path string) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	if err := s.Write(tmp); err != nil {
		tmp.Close()
		return 0, err
	}
	st, err := tmp.Stat()
	if err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, err
	}
	return st.Size(), os.Rename(tmp.Name(), path)
}

// fileBar counts inputs done; it draws only on a terminal.
type fileBar interface {
	Add(int) error
	Finish() error
}

type noBar struct{}

func (noBar) Add(int) error { return nil }
func (noBar) Finish() error { return nil }

// summarizeProgress is a bar of inputs done on stderr when it is a
// terminal (several inputs are read at once: one bar for all of them).
func summarizeProgress(n int) fileBar {
	if n < 2 || !isTerminal(os.Stderr) {
		return noBar{}
	}
	return progressbar.NewOptions(n,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("summarizing"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}
