package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/rules/digest"
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
	src      string // the input's path
	out      string
	inBytes  int64
	outBytes int64
	kind     load.Kind
}

func runSummarize(stdout, stderr io.Writer, args []string, o *summarizeOptions) error {
	if o.output == "" {
		return badInput(errors.New("summarize needs -o DIR"))
	}
	if o.jobs < 0 {
		return badInput(fmt.Errorf("--jobs %d: want 0 (one per CPU) or more", o.jobs))
	}
	var sh *shard
	if o.shard != "" {
		s, err := parseShard(o.shard)
		if err != nil {
			return badInput(err)
		}
		sh = &s
	}
	if st, err := os.Stat(o.output); err == nil && !st.IsDir() {
		return badInput(fmt.Errorf("-o %s: not a directory", o.output))
	}
	w := &summaryWriter{dir: o.output, names: map[string][]string{}, done: map[*load.File]summarized{}, bar: noBar{}}
	q := question{command: "summarize", kinds: []load.Kind{load.Trace, load.Snapshot, load.Steps, load.SMI, load.Timeline, load.Summary},
		fallback: load.Trace, limits: o.limits,
		tune: func(lo *load.Options) {
			lo.Parallel = o.jobs // 0: one per CPU
			lo.Select = func(srcs []load.Source) []load.Source { return w.pick(srcs, sh) }
			lo.Reduce = w.write
			lo.Progress = nil // one bar of inputs (summarizeProgress)
			lo.Done = func() { w.bar.Add(1) }
		}}
	// The inputs' records are most of the heap and are dropped after each
	// summary: collect more often than the default so that the peak stays
	// near the inputs in flight.
	analysisPhase()
	files, err := loadFiles(stderr, args, q)
	w.bar.Finish()
	if w.mkdirErr != nil {
		return badInput(load.FileError(o.output, w.mkdirErr))
	}
	if err != nil {
		if sh != nil && w.selected && w.picked == 0 {
			report.EmptyShard(stdout, sh.Index, sh.Count)
			return nil
		}
		return err
	}
	for _, f := range files {
		r := w.done[f]
		report.SummaryWritten(stdout, r.src, r.out, string(r.kind), r.outBytes, r.inBytes)
	}
	return nil
}

// summaryWriter writes each input's summary as the loader reads it, into
// dir, under the name digest.Names gives it among all the inputs.
type summaryWriter struct {
	dir   string
	mu    sync.Mutex
	names map[string][]string // input path -> summary names (one per time it is given)
	done  map[*load.File]summarized
	// selected: the inputs were expanded and picked, picked of them.
	selected bool
	picked   int
	bar      fileBar
	// mkdirErr: dir could not be made (then nothing is read).
	mkdirErr error
}

// pick names the summaries of all the sources, then keeps those of this
// shard (all without --shard): two tasks never choose the same name for
// different files. The arguments are good by now: it makes dir.
func (w *summaryWriter) pick(srcs []load.Source, sh *shard) []load.Source {
	if w.mkdirErr = os.MkdirAll(w.dir, 0o755); w.mkdirErr != nil {
		return nil
	}
	paths := make([]string, len(srcs))
	for i, s := range srcs {
		paths[i] = s.Path
	}
	names := digest.Names(paths)
	if sh != nil {
		srcs, names = sh.pick(srcs, names)
	}
	for i, s := range srcs {
		w.names[s.Path] = append(w.names[s.Path], filepath.Join(w.dir, names[i]))
	}
	w.selected, w.picked = true, len(srcs)
	w.bar = summarizeProgress(len(srcs))
	return srcs
}

// write is the loader's Reduce: it writes f's summary and keeps what
// summarize reports of it, not f's records.
func (w *summaryWriter) write(f *load.File) (*load.File, error) {
	w.mu.Lock()
	out := w.names[f.Path][0]
	w.names[f.Path] = w.names[f.Path][1:]
	w.mu.Unlock()
	r := summarized{src: f.Path, out: out, kind: f.Kind}
	if f.Path != load.Stdin {
		if st, err := os.Stat(f.Path); err == nil {
			r.inBytes = st.Size()
			if ost, err := os.Stat(out); err == nil && os.SameFile(st, ost) {
				return nil, &load.Error{Path: f.Path, Err: errors.New("its summary would overwrite it: write the summaries elsewhere (-o)")}
			}
		}
	}
	in, err := ruleInput(f)
	if err != nil {
		return nil, err
	}
	s := digest.Make(in, r.inBytes, version, f.Warnings)
	if r.outBytes, err = writeSummaryFile(s, out); err != nil {
		return nil, load.FileError(out, err)
	}
	done := &load.File{Path: f.Path, Kind: f.Kind, Rank: f.Rank, Warnings: f.Warnings}
	w.mu.Lock()
	w.done[done] = r
	w.mu.Unlock()
	return done, nil
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
