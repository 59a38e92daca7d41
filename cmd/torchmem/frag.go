package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newFragCmd) }

type fragOptions struct {
	limits chrometrace.Limits // the readers' caps (the --max-* flags)
	rules.FragOptions
	format string
}

func newFragCmd() *cobra.Command {
	o := &fragOptions{FragOptions: rules.DefaultFragOptions()}
	def := rules.DefaultFragOptions()
	cmd := &cobra.Command{
		Use:   "frag INPUT...",
		Short: "Is the CUDA caching allocator fragmented, and what did it cost: retries, OOMs, headroom, floods, churn",
		Long: `Reads a profiler trace (recorded with profile_memory=True), an allocator
snapshot, a steps log or memory_summary() tables, and asks whether the
caching allocator's fragmentation cost something. Split free memory inside
segments is the allocator working as designed; FRAGMENTED means it cost:

  - cudaMalloc retries (torch's num_alloc_retries, net of the one retry an
    OOM makes before it is raised): each a cache flush and a synchronize;
  - an OOM while the cache held enough free bytes for the request (at the
    failure: a trace's OOM event, or the snapshot's segments with the
    history after the OOM undone), none in a piece the request could use;
  - reserved at the process's limit (capacity x memory fraction, when the
    steps log records it) with more split memory than the headroom; or
  - reserved growing regularly while allocated stays flat.

Otherwise the verdict is OK with the figure measured and what it did not
cost (0 retries, the headroom). The trace's signals are the measurements:
a flood of small blocks (thousands of allocations of <= 4 KiB per step
making most of all allocations), new segments added while their own pool
already held the requested bytes idle (--min-gap-bytes, --min-gap-fraction);
their rules warn on their own.

cudaMalloc/cudaFree after the first step (the cache keeps missing, or
torch.cuda.empty_cache() in the loop gives segments back that the next step
takes again) is reported as churn: it costs time, not memory. The
allocator's retry before an out-of-memory error (it frees its cache and
tries again) and growing the cache back after it are not churn.

It also prints the allocation size histogram (by the allocator's size
classes), alloc/free traffic per step and the reserved-minus-allocated gap.
What a trace cannot show is the layout inside segments (inactive split
blocks, the largest free block): that needs an allocator snapshot.

Sizes use binary units as torch prints them (1 MB = 1 MiB); --format json
gives exact integer bytes and nanoseconds.

Exit status: 0 ok or unknown, 1 fragmented, 2 bad input. The verdict is the
one analyze and check give; check passes on it unless a rules file makes the
fragmentation rules errors (they are warnings by default).`,
		Example: `  torchmem frag trace.json.gz
  torchmem frag trace.json.gz --format json
  torchmem frag trace.json.gz --min-small-per-step 500 --min-churn-per-step 0.5`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limits = limitsOf(cmd)
			return runFrag(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Device, "device", -1, "only this GPU index (-1 = all; the reserved timeline follows the GPU with the highest allocated memory)")
	sizeVar(f, &o.SmallMaxBytes, "small-max-bytes", def.SmallMaxBytes, "largest block size counted as a small allocation")
	f.Float64Var(&o.MinSmallPerStep, "min-small-per-step", def.MinSmallPerStep, "small allocations per step that make a flood (with --min-small-fraction)")
	f.Float64Var(&o.MinSmallFraction, "min-small-fraction", def.MinSmallFraction, "share of all allocations that small ones must reach for a flood")
	f.Float64Var(&o.MinGapFraction, "min-gap-fraction", def.MinGapFraction, "reserved-minus-allocated (its largest in the window), as a fraction of reserved, that counts as a gap")
	sizeVar(f, &o.MinGapBytes, "min-gap-bytes", def.MinGapBytes, "bytes of segments added while their pool held the request's bytes idle that count as waste")
	f.Float64Var(&o.MinChurnPerStep, "min-churn-per-step", def.MinChurnPerStep, "cudaMalloc/cudaFree calls per step after the first that count as churn")
	f.IntVar(&o.Depth, "depth", def.Depth, "Python frames kept per site stack (innermost)")
	f.IntVar(&o.TopSites, "top", 5, "sites shown (0 = all)")
	f.StringVar(&o.format, "format", formatTable, "output format: table, json, markdown")
	return cmd
}

func runFrag(stdout, stderr io.Writer, args []string, o *fragOptions) error {
	if err := checkFormat(o.format, formatTable, formatJSON, formatMarkdown); err != nil {
		return err
	}
	if o.SmallMaxBytes <= 0 || o.TopSites < 0 || o.Depth < 0 || o.MinSmallFraction < 0 || o.MinGapFraction < 0 {
		return badInput(errors.New("--small-max-bytes must be positive; --top, --depth and the fractions must not be negative"))
	}
	// The verdict is the Evaluation's, judged with this command's options
	// (they become the frag rules' thresholds), each file on its own; the
	// tables are the analysis it was judged from.
	q := question{command: "frag", kinds: []load.Kind{load.Trace, load.Snapshot, load.Summary}, fallback: load.Trace,
		options: rules.Options{Rules: rules.DefaultRuleSet(), Frag: &o.FragOptions, Separately: true}, gate: gateFragmented}
	q.limits = o.limits
	ev, err := answer(stderr, args, q)
	if err != nil {
		return err
	}
	if err := report.Generate(stdout, report.New(ev, report.Options{View: report.ViewFrag, Format: o.format})); err != nil {
		return err
	}
	return exitOf(ev, q.gate)
}
