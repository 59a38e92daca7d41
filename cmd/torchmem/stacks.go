package main

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newStacksCmd) }

type stacksOptions struct {
	limits    chrometrace.Limits // the readers' caps (the --max-* flags)
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
			o.limits = limitsOf(cmd)
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

func runStacks(stdout, stderr io.Writer, args []string, o *stacksOptions) error {
	if err := checkFormat(o.format, formatTable, formatJSON, formatCSV, formatMarkdown, formatFolded); err != nil {
		return err
	}
	for _, key := range []string{o.sort, o.weight} {
		if _, err := rules.SiteValue(key); err != nil {
			return badInput(err)
		}
	}
	if o.format == formatFolded {
		o.folded = true
	}
	format := o.format
	if o.folded {
		format = formatFolded
	}
	// Folded stacks are every site, by weight.
	sites := &rules.SiteQuery{SiteOptions: memtimeline.SiteOptions{Device: o.device, Depth: o.depth, AllFrames: o.allFrames}, Sort: o.sort, Top: o.top, All: o.folded}
	if o.folded {
		sites.Sort = o.weight
	}
	q := question{command: "stacks", kinds: []load.Kind{load.Trace}, fallback: load.Trace, gate: gateNone,
		options: rules.Options{Tables: &rules.TableQuery{Sites: sites}}}
	q.limits = o.limits
	ev, err := answer(stderr, args, q)
	if err != nil {
		return err
	}
	return report.Generate(stdout, report.New(ev, report.Options{View: report.ViewStacks, Format: format, Weight: o.weight}))
}
