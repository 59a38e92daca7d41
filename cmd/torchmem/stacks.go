package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/escape"
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
	return eachInput(stdout, format, files, func(w io.Writer, f *load.File) error {
		label := ""
		if len(files) > 1 {
			label = f.Path
		}
		return writeStacks(w, stderr, f.Path, label, f.Trace, sortBy, weight, o)
	})
}

// writeStacks prints one trace's allocation sites. label, when set, names
// the trace (several traces): a CSV column, the root of folded stacks.
func writeStacks(stdout, stderr io.Writer, path, label string, t *chrometrace.Trace, sortBy, weight func(*memtimeline.Site) int64, o *stacksOptions) error {
	if len(t.Memory) == 0 {
		fmt.Fprintf(stderr, "torchmem: note: %s has no memory events; profile with profile_memory=True to see allocation sites\n", path)
	} else if len(t.PyFrames) == 0 {
		fmt.Fprintf(stderr, "torchmem: note: %s was recorded without Python stacks: sites are operator chains only. Profile with with_stack=True to see file:line.\n", path)
	}
	attr := chrometrace.Attribute(t)
	sites := memtimeline.Sites(t, attr, memtimeline.Lifetimes(t, o.device), memtimeline.SiteOptions{Device: o.device, Depth: o.depth, AllFrames: o.allFrames})

	if o.folded {
		return writeFolded(stdout, sites, weight, label)
	}
	slices.SortStableFunc(sites, func(a, b memtimeline.Site) int { return cmp.Compare(sortBy(&b), sortBy(&a)) })
	if o.top > 0 && len(sites) > o.top {
		sites = sites[:o.top]
	}
	if o.format == formatJSON {
		out := struct {
			Trace  string           `json:"trace"`
			Stacks []report.SiteRow `json:"stacks"`
		}{Trace: path, Stacks: []report.SiteRow{}}
		for _, s := range sites {
			frames := s.Frames
			if frames == nil {
				frames = []string{}
			}
			out.Stacks = append(out.Stacks, report.SiteRow{Frames: frames, Operator: s.Operator, ForwardOperator: s.ForwardOp,
				AllocBytes: s.AllocBytes, LiveBytesAtEnd: s.LiveBytesAtEnd, LiveBytesAtPeak: s.LiveBytesAtPeak,
				Allocs: s.Allocs, LiveBlocksAtEnd: s.LiveBlocksAtEnd})
		}
		return writeJSON(stdout, out)
	}
	tw := newTableWriter()
	exact := o.format == formatCSV
	bytesCol := func(n int64) string {
		if exact {
			return strconv.FormatInt(n, 10)
		}
		return memtimeline.FormatBytes(n)
	}
	unit := ""
	if exact {
		unit = " (bytes)"
	}
	// The table stacks frames outermost first, one per line; CSV and
	// Markdown put them on one line innermost first, each "← called from"
	// the next: the header says the order each one shows.
	stackHeader := "Python stack (outermost first)"
	if o.format != formatTable {
		stackHeader = "Python stack (innermost first, ← called from)"
	}
	header := table.Row{stackHeader, "Operator", "Allocated" + unit, "# Allocs", "Live at end" + unit, "Live at peak" + unit}
	csvLabel := label != "" && o.format == formatCSV
	if csvLabel {
		header = append(table.Row{"Trace"}, header...)
	}
	tw.AppendHeader(header)
	sep := "\n"
	if o.format != formatTable {
		sep = " ← "
	}
	for _, s := range sites {
		frames := s.Frames
		if len(frames) == 0 {
			frames = []string{"(no Python frames)"}
		}
		op := s.Operator
		if s.ForwardOp != "" {
			op += " (backward of " + s.ForwardOp + ")"
		}
		if o.format == formatTable {
			op = strings.ReplaceAll(op, " > ", "\n> ")
		}
		stack := strings.Join(frames, sep)
		if o.format != formatTable {
			rev := slices.Clone(frames)
			slices.Reverse(rev)
			stack = strings.Join(rev, sep)
		}
		row := table.Row{stack, op, bytesCol(s.AllocBytes), s.Allocs, bytesCol(s.LiveBytesAtEnd), bytesCol(s.LiveBytesAtPeak)}
		if csvLabel {
			row = append(table.Row{label}, row...)
		}
		tw.AppendRow(row)
		if o.format == formatTable {
			tw.AppendSeparator()
		}
	}
	tw.SetColumnConfigs([]table.ColumnConfig{
		{Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight},
		{Number: 5, Align: text.AlignRight}, {Number: 6, Align: text.AlignRight},
	})
	if o.format == formatMarkdown && label != "" {
		fmt.Fprintf(stdout, "### %s\n\n", mdEscape(path))
	}
	if o.format == formatTable && label != "" {
		fmt.Fprintf(stdout, "%s\n", path)
	}
	renderTable(stdout, tw, o.format)
	return nil
}

// writeFolded writes one line per site: frames and operators joined by
// ';', outermost first, then the weight in bytes.
func writeFolded(w io.Writer, sites []memtimeline.Site, weight func(*memtimeline.Site) int64, root string) error {
	clean := escape.FoldedFrame
	slices.SortStableFunc(sites, func(a, b memtimeline.Site) int { return cmp.Compare(weight(&b), weight(&a)) })
	for _, s := range sites {
		v := weight(&s)
		if v <= 0 {
			continue
		}
		parts := make([]string, 0, len(s.Frames)+5)
		if root != "" {
			parts = append(parts, clean(root))
		}
		for _, f := range s.Frames {
			parts = append(parts, clean(f))
		}
		for _, op := range strings.Split(s.Operator, " > ") {
			if op != "" {
				parts = append(parts, clean(op))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, "(unknown)")
		}
		if _, err := fmt.Fprintf(w, "%s %d\n", strings.Join(parts, ";"), v); err != nil {
			return err
		}
	}
	return nil
}
