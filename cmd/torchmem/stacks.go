package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline"
)

func init() { subcommands = append(subcommands, newStacksCmd) }

type stacksOptions struct {
	depth     int
	device    int
	top       int
	allFrames bool
	sort      string
	folded    bool
	weight    string
	format    string
}

func newStacksCmd() *cobra.Command {
	o := &stacksOptions{}
	cmd := &cobra.Command{
		Use:   "stacks TRACE...",
		Short: "Which lines of Python allocate the GPU memory",
		Long: `Ties every GPU allocation in the trace to the Python stack and the operator
chain that made it, and ranks the sites by bytes allocated, bytes still alive
at the end of the trace, and bytes alive when allocated memory peaked.

A free is charged to the site that allocated the block, wherever it happened.
Backward-pass allocations (on the autograd thread) are tied to the forward
operator that created the autograd node, and so to your forward code.

By default frames from torch, installed packages and the standard library are
collapsed so your own lines lead; --all-frames shows them. --folded writes
Brendan Gregg's folded-stack format for flamegraph.pl, inferno or speedscope.
The trace needs with_stack=True for Python frames; without it, sites are
operator chains only.`,
		Example: `  torchmem stacks trace.json.gz
  torchmem stacks trace.json.gz --sort live --depth 3
  torchmem stacks trace.json.gz --folded --weight live > live.folded && flamegraph.pl live.folded > live.svg`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStacks(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.depth, "depth", 5, "keep the innermost N Python frames of each stack (0 = all)")
	f.IntVar(&o.device, "device", -1, "only allocations on this GPU index (-1 = all)")
	f.IntVar(&o.top, "top", 15, "show the first N sites (0 = all)")
	f.BoolVar(&o.allFrames, "all-frames", false, "keep torch, site-packages and standard-library frames")
	f.StringVar(&o.sort, "sort", "alloc", "rank sites by: alloc (bytes allocated), live (alive at end), peak (alive at peak), allocs (count)")
	f.BoolVar(&o.folded, "folded", false, "write folded stacks (frames;operators bytes) instead of a table (= --format folded)")
	f.StringVar(&o.weight, "weight", "alloc", "with --folded, weight stacks by: alloc, live, peak")
	f.StringVar(&o.format, "format", formatTable, "output format: table, json, csv, markdown")
	return cmd
}

func siteValue(key string) (func(s *memtimeline.Site) int64, error) {
	switch key {
	case "alloc":
		return func(s *memtimeline.Site) int64 { return s.AllocBytes }, nil
	case "live":
		return func(s *memtimeline.Site) int64 { return s.LiveBytesAtEnd }, nil
	case "peak":
		return func(s *memtimeline.Site) int64 { return s.LiveBytesAtPeak }, nil
	case "allocs":
		return func(s *memtimeline.Site) int64 { return s.Allocs }, nil
	}
	return nil, badInput(fmt.Errorf("unknown value %q (want alloc, live, peak or allocs)", key))
}

func runStacks(stdout, stderr io.Writer, args []string, o *stacksOptions) error {
	if err := checkFormat(o.format, formatTable, formatJSON, formatCSV, formatMarkdown, formatFolded); err != nil {
		return err
	}
	sortBy, err := siteValue(o.sort)
	if err != nil {
		return err
	}
	weight, err := siteValue(o.weight)
	if err != nil {
		return err
	}
	files, err := loadFiles(stderr, args, "stacks", load.Trace, load.Trace)
	if err != nil {
		return err
	}
	if o.format == formatFolded {
		o.folded = true
	}
	format := o.format
	if o.folded {
		format = formatFolded
	}
	var tables []report.SiteTable
	for _, f := range files {
		t := f.Trace
		if len(t.Memory) == 0 {
			fmt.Fprintf(stderr, "torchmem: note: %s has no memory events; profile with profile_memory=True to see allocation sites\n", f.Path)
		} else if len(t.PyFrames) == 0 {
			fmt.Fprintf(stderr, "torchmem: note: %s was recorded without Python stacks: sites are operator chains only. Profile with with_stack=True to see file:line.\n", f.Path)
		}
		attr := chrometrace.Attribute(t)
		sites := memtimeline.Sites(t, attr, memtimeline.Lifetimes(t, o.device), memtimeline.SiteOptions{Device: o.device, Depth: o.depth, AllFrames: o.allFrames})
		if !o.folded { // folded stacks are every site, by weight
			slices.SortStableFunc(sites, func(a, b memtimeline.Site) int { return cmp.Compare(sortBy(&b), sortBy(&a)) })
			if o.top > 0 && len(sites) > o.top {
				sites = sites[:o.top]
			}
		}
		tables = append(tables, report.SiteTable{Path: f.Path, Sites: sites})
	}
	return report.Generate(stdout, report.NewStacks(tables, weight, report.Options{Format: format}))
}
