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

func init() { subcommands = append(subcommands, newSnapshotCmd) }

// snapshotOptions are the flags of `torchmem snapshot` (and of any command
// that routes allocator snapshots here).
type snapshotOptions struct {
	limits chrometrace.Limits // the readers' caps (the --max-* flags)
	format string
	top    int // segments shown in the fill map
	leaks  int // leak candidate groups shown
}

func newSnapshotCmd() *cobra.Command {
	o := snapshotOptions{}
	cmd := &cobra.Command{
		Use:   "snapshot FILE...",
		Short: "Summarise a CUDA allocator snapshot: reserved vs allocated, fragmentation, leak candidates, OOMs",
		Example: `  torchmem snapshot torchmem_out/run_rank0.snapshot.pickle.gz
  torchmem snapshot snapshot.pickle --format json
  torchmem frag snapshot.pickle     # free space split inside segments`,
		Long: `snapshot reads the pickle that torch.cuda.memory._dump_snapshot(path) writes
after torch.cuda.memory._record_memory_history() (plain or gzipped) and prints:

  - what the caching allocator holds: reserved, allocated, requested bytes,
    free bytes inside partly used segments (inactive split: empty_cache()
    cannot return them), the largest free block;
  - a fill map of the largest segments, one line each;
  - leak candidates: allocations in the recorded history never freed,
    grouped by the innermost frame of your own Python code;
  - the allocator settings (PYTORCH_CUDA_ALLOC_CONF) and recorded OOMs.

The pickle is decoded as plain data; nothing in it is executed.
Byte sizes in tables use binary units (1 MB = 1 MiB, as torch prints them);
--format json gives exact integer bytes.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limits = limitsOf(cmd)
			return runSnapshot(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", formatTable, "output format: table or json")
	cmd.Flags().IntVar(&o.top, "top", 10, "segments to show in the fill map, largest first")
	cmd.Flags().IntVar(&o.leaks, "leaks", 10, "leak candidate groups to show (0 = all)")
	return cmd
}

func runSnapshot(w, stderr io.Writer, args []string, o snapshotOptions) error {
	if err := checkFormat(o.format, formatTable, formatJSON, formatMarkdown); err != nil {
		return err
	}
	if o.top < 0 || o.leaks < 0 {
		return badInput(errors.New("--top and --leaks must be >= 0"))
	}
	q := question{command: "snapshot", kinds: []load.Kind{load.Snapshot}, fallback: load.Snapshot, gate: gateNone,
		options: rules.Options{Tables: &rules.TableQuery{Snapshot: true}}}
	q.limits = o.limits
	ev, err := answer(stderr, args, q)
	if err != nil {
		return err
	}
	return report.Generate(w, report.New(ev, report.Options{View: report.ViewSnapshot, Format: o.format, Top: o.top, Leaks: o.leaks}))
}
