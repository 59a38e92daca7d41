package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newStepsCmd) }

func newStepsCmd() *cobra.Command {
	var (
		format string
		opts   = steplog.DefaultOptions()
	)
	cmd := &cobra.Command{
		Use:   "steps FILE...",
		Short: "Does allocated memory grow step over step? Reads a per-step memory log (JSON Lines)",
		Example: `  torchmem steps torchmem_out/run_rank0.steps.jsonl
  torchmem steps train.log          # a log printing torch.cuda.memory_summary()
  torchmem steps stats_steps.jsonl --warmup 2 --format json`,
		Long: `steps reads a per-step memory log: one JSON object per line, written by the
training loop after every step, e.g.

    with open("stats_steps.jsonl", "a") as f:
        f.write(json.dumps({"step": step, "t": time.time(),
                            "allocated": torch.cuda.memory_allocated(),
                            "reserved": torch.cuda.memory_reserved()}) + "\n")

It also reads training logs with torch.cuda.memory_summary() tables in them
(print(torch.cuda.memory_summary()) every N steps, with or without a logger
prefix on each line): each table is one record, its step the last "step N"
the log printed before it (else tables count 0, 1, 2, ...: growth per summary
interval); torchmem frag reads their non-releasable memory and cudaMalloc
retries.

Keys may also be memory_stats() names (allocated_bytes.all.current,
reserved_bytes.all.current, allocated_bytes.all.peak), memory_allocated,
allocated_mb, ...; lines with a "device" or "rank" key are reported per device.

It says "growing" (with bytes per step) when the log ends in a regular pattern
of rises (leaving out --warmup leading steps): each of the last 3 or more steps
rose, by steady amounts or more each step, or rises come exactly every P steps
(2 or more of them, flat between: an evaluation every P steps that keeps its
outputs). Size decides nothing; a one-time jump is never growth, and rises that
stop and stay flat to the end (a queue or cache that filled up) are "flat",
said as bounded. The least-squares line (per step, R^2) is shown alongside.

` + exitPolicy,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, formatTable, formatJSON, formatMarkdown); err != nil {
				return err
			}
			if opts.WarmupSteps < 0 {
				return badInput(fmt.Errorf("--warmup %d: want 0 or more steps", opts.WarmupSteps))
			}
			// The fit is the Evaluation's (the same memoized analysis,
			// with this command's --warmup), each log judged on its own,
			// and so is the exit code.
			q := question{command: "steps", kinds: []load.Kind{load.Steps, load.Summary}, fallback: load.Steps,
				options: rules.Options{Rules: rules.DefaultRuleSet(), Steps: &opts, Separately: true}}
			q.limits = limitsOf(cmd)
			ev, err := answer(cmd.ErrOrStderr(), args, q)
			if err != nil {
				return err
			}
			if err := report.Generate(cmd.OutOrStdout(), report.New(ev, report.Options{View: report.ViewSteps, Format: format})); err != nil {
				return err
			}
			return exitOf(ev, q.gate)
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", formatTable, "output format: table or json")
	f.IntVar(&opts.WarmupSteps, "warmup", opts.WarmupSteps, "leading steps left out of the fit (optimizer state is created in step 0)")
	return cmd
}
