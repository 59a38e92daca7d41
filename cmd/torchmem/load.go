package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/torchmem/torchmem/cmd/internal/escape"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/digest"
)

// progressMinBytes: smaller files load faster than a bar could be read.
const progressMinBytes = 32 << 20

// stdin is what "-" reads; tests replace it.
var stdin io.Reader = os.Stdin

// manyInputs is how many inputs a command that may bound its memory reads
// whole; past it, each trace and snapshot is summarized as soon as it is
// read (torchmem summarize's digest) and its records dropped, so that
// memory stays near that of the few inputs in flight (one per CPU), not
// their sum.
func manyInputs() int { return max(8, 2*runtime.GOMAXPROCS(0)) }

// loadInputs is the one loader entry: it reads the command's inputs
// (files, directories expanded, "-" for stdin) through package load, of
// the kinds q asks for (a file of another kind in a directory is passed
// over; an unreadable one is skipped with a warning; an unrecognized file
// named on the command line is parsed as q.fallback so that its parser
// says what is wrong), and makes them the rules' inputs. With q.bounded, a
// directory of many inputs is read into summaries (see manyInputs), with
// one bar of inputs read on a terminal. Warnings go to stderr; errors name
// the file and mean bad input (exit 2).
func loadInputs(stderr io.Writer, args []string, q question) ([]*rules.Input, error) {
	files, err := loadFiles(stderr, args, q)
	if err != nil {
		return nil, err
	}
	out := make([]*rules.Input, len(files))
	for i, f := range files {
		if out[i], err = ruleInput(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// loaderOptions are the loader's options for q: every input of every
// command is opened and read with them.
func loaderOptions(stderr io.Writer, q question) load.Options {
	tr := q.trace
	// No command reads a trace's flow arrows (backward work is tied to its
	// forward op by sequence number): they would be 5 MB of a 1 GB trace
	// kept to the end for nothing.
	tr.SkipFlows = true
	return load.Options{
		Trace:    tr,
		Limits:   q.limits,
		Kinds:    q.kinds,
		Fallback: q.fallback,
		Command:  q.command,
		Stdin:    stdin,
		Progress: progressBar,
		Warn:     func(msg string) { warn(stderr, "%s", msg) },
	}
}

// reopen opens path again as the loader opened it for q (decompressed,
// its kind sniffed), for a command that copies an input it has read
// (annotate).
func reopen(stderr io.Writer, path string, q question) (*load.Reader, error) {
	o := loaderOptions(stderr, q)
	o.Progress = nil // read once already: the copy goes fast
	r, err := load.Open(path, &o)
	if err != nil {
		return nil, badInput(err)
	}
	return r, nil
}

// loadFiles reads the files loadInputs makes inputs of.
func loadFiles(stderr io.Writer, args []string, q question) ([]*load.File, error) {
	o := loaderOptions(stderr, q)
	var reduced atomic.Int64
	if q.bounded {
		if srcs, err := load.Expand(args); err == nil && len(srcs) > manyInputs() {
			bar := summarizeProgress(len(srcs))
			defer bar.Finish()
			o.Progress = nil // one bar for all inputs
			if sourceBytes(srcs) >= reduceLargeInputs {
				debug.SetGCPercent(reduceGCPercent) // records are dropped as they are summarized: collect them early
			}
			o.Done = func() { bar.Add(1) }
			o.Reduce = func(f *load.File) (*load.File, error) {
				if f.Trace == nil && f.Snapshot == nil {
					return f, nil
				}
				var size int64 = -1
				if st, err := os.Stat(f.Path); err == nil {
					size = st.Size()
				}
				in, err := ruleInput(f)
				if err != nil {
					return f, nil // refused where the inputs are made
				}
				reduced.Add(1)
				s := digest.Make(in, size, version, f.Warnings)
				s.RestoreCharts()
				return &load.File{Path: f.Path, Kind: load.Summarized, Rank: f.Rank, Summarized: s, Warnings: f.Warnings}, nil
			}
		}
	}
	if q.noCharts {
		// They draw no chart: a summary's charts (half of it) are let go
		// as each is read, so that a reduce of 10,000 summaries holds
		// their verdicts, not their pictures.
		reduce := o.Reduce
		o.Reduce = func(f *load.File) (*load.File, error) {
			if reduce != nil {
				f, _ = reduce(f) // never fails
			}
			if f.Summarized != nil {
				f.Summarized.Charts = nil
			}
			return f, nil
		}
	}
	if q.tune != nil {
		q.tune(&o)
	}
	files, err := load.Load(args, o)
	if err != nil {
		return nil, badInput(err)
	}
	if slices.Contains(q.kinds, load.Summarized) {
		// Summaries of the other kinds the command reads only (as it
		// passes over those files in a directory).
		files = summariesOf(files, q.kinds...)
		if len(files) == 0 {
			return nil, badInput(fmt.Errorf("%s: no summary of %s here", strings.Join(args, " "), kindNames(slices.DeleteFunc(slices.Clone(q.kinds), func(k load.Kind) bool { return k == load.Summarized }))))
		}
	}
	n := -reduced.Load()
	for _, f := range files {
		if f.Summarized != nil {
			n++
		}
	}
	if n > 0 {
		note(stderr, "%d of %d inputs are summaries: %s", n, len(files), rules.NeedsFullTrace)
	}
	if r := reduced.Load(); r > 0 {
		note(stderr, "%d inputs: each of the %d traces and snapshots was reduced to its summary as it was read, to keep memory bounded (the verdicts are the same; ops and stacks show every row)", len(files), r)
	}
	analysisPhase()
	return files, nil
}

// summariesOf drops the summaries of kinds the command does not read
// (as it would pass over those files in a directory).
func summariesOf(files []*load.File, kinds ...load.Kind) []*load.File {
	out := files[:0:0]
	for _, f := range files {
		if f.Summarized == nil || slices.Contains(kinds, load.Kind(f.Summarized.Kind)) {
			out = append(out, f)
		}
	}
	return out
}

// progressBar shows a bar on a terminal while a large file is read.
func progressBar(path string, size int64, r io.Reader) (io.Reader, func()) {
	if size < progressMinBytes || !isTerminal(os.Stderr) {
		return r, func() {}
	}
	bar := progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("reading "+escape.Terminal(path)), // written straight to the terminal
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	pr := progressbar.NewReader(r, bar)
	return &pr, func() { bar.Finish() }
}

// analysisGCPercent is the garbage collector's target while analyses run
// over loaded inputs. The inputs are most of the live heap and stay until
// the end; the default (100) would let garbage grow to their size again,
// doubling the peak memory of analyze on a large trace. 5 keeps the peak
// near the inputs plus their analyses (measured on a 1 GB trace: 458 MB
// peak RSS at 100, 280-297 MB at 25, 267-280 MB at 10 with the same user
// CPU within the noise of a shared machine; later, with the reader's
// record slices sized up front, 217-220 MB at 10, 211-212 MB at 5, for
// 15 -> 21 collections, 45 ms more CPU) for a few more, cheap,
// collections: the records are pointer-free and take no marking.
const analysisGCPercent = 5

// reduceGCPercent is the collector's target while many inputs are read
// into summaries, their records dropped as each is summarized.
const reduceGCPercent = 10

// reduceLargeInputs is the bytes on disk of many inputs from which their
// reduce lowers the collector's target: like analysisLargeHeap, below it
// the memory saved is a few MB and a 10% target collects every few hundred
// KB (measured: 10-15 s of the CPU of the test suite's cmd/torchmem, whose
// 99 reduces of small folders set it for every test after them). A
// quarter of analysisLargeHeap, as gzipped inputs inflate several times.
const reduceLargeInputs = analysisLargeHeap / 4

// sourceBytes is the size on disk of the regular files among srcs.
func sourceBytes(srcs []load.Source) int64 {
	var n int64
	for _, s := range srcs {
		if st, err := os.Stat(s.Path); err == nil && st.Mode().IsRegular() {
			n += st.Size()
		}
	}
	return n
}

// analysisLargeHeap is the live heap from which analysisPhase lowers the
// collector's target. Below it the inputs are small, the memory saved is
// a few MB, and a target of 10% of a small heap collects every few hundred
// KB (measured: 12% of the CPU of the test suite's small inputs).
const analysisLargeHeap = 64 << 20

// analysisPhase starts the analysis of loaded inputs: with a large live
// heap (the inputs) the collector's target drops to analysisGCPercent.
func analysisPhase() {
	if liveHeapBytes() >= analysisLargeHeap {
		debug.SetGCPercent(analysisGCPercent)
	}
}

// liveHeapBytes is the heap the last collection found live (0 before
// the first one).
func liveHeapBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// ruleInput is a loaded file as the rules see it (a memory_summary() log
// is also read as a per-step log: rules.NewInput). An input that holds no
// data or data of several kinds is refused, naming the file.
func ruleInput(f *load.File) (*rules.Input, error) {
	var in *rules.Input
	var err error
	if f.Summarized != nil {
		in, err = f.Summarized.Input()
	} else {
		in, err = rules.NewInput(f.Path, f.Rank, rules.Data{Trace: f.Trace, Snapshot: f.Snapshot, StepLog: f.Steps,
			SMI: f.SMI, SMIApps: f.SMIApps, Timeline: f.Timeline, MemSummary: f.Summary})
	}
	if err != nil {
		return nil, badInput(load.FileError(f.Path, err))
	}
	return in, nil
}

// Short names for the kinds, as the renderers use them.
const (
	kindTrace    = load.Trace
	kindSnapshot = load.Snapshot
	kindSMI      = load.SMI
	kindSteps    = load.Steps
	kindTimeline = load.Timeline
	kindSummary  = load.Summary
)
