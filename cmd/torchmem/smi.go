package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newSMICmd) }

func newSMICmd() *cobra.Command {
	var (
		format   string
		gpu      string
		opts     = smi.DefaultOptions()
		minGrowD time.Duration
	)
	cmd := &cobra.Command{
		Use:   "smi FILE...",
		Short: "Find leaks, idle-but-full GPUs, near-OOM time and zombie processes in nvidia-smi CSV logs",
		Example: `  torchmem smi smi.csv
  torchmem smi smi.csv compute_apps.csv
  torchmem smi run_dir/
  torchmem smi smi.csv --gpu 3 --threshold 0.95
  torchmem smi smi.csv --format json`,
		Long: `smi reads a log written by

    nvidia-smi --query-gpu=index,timestamp,memory.used,memory.total,utilization.gpu,utilization.memory --format=csv -lms 200 > smi.csv

(any column order; nounits; noheader when values carry units; several GPUs;
gzipped or not) and reports per GPU:

  - leaks: stretches where memory.used keeps reaching new highs steadily
    (at least --min-growth-duration, many new highs, no single jump
    dominating, a straight line fits with R^2 >= 0.9), with their rate.
    A drop ends a run, and growth that then holds flat at least as long
    as it grew is a load or a cache filled once, so processes that load
    (however smoothly), sit on a plateau and exit are not leaks; dips of
    a few MiB are tolerated;
  - memory high but GPU idle: half the GPU's peak memory held while
    utilization.gpu stays at 10% or less for 10 s or more, the usual sign
    of a job starved by its input pipeline;
  - time above --threshold of memory.total (the out-of-memory alarm).

It also reads the per-process log written beside it by

    nvidia-smi --query-compute-apps=timestamp,pid,process_name,used_memory,gpu_uuid --format=csv -lms 200 > compute_apps.csv

(one query or logged; the header is needed) and reports memory per process:
zombies (a process keeping its memory, unchanged, after the others on its
GPU exited, or with the GPU idle), processes sharing a GPU, the process that
grows. 'torchmem analyze' on the run's folder also puts nvidia-smi beside
torch's own numbers (the steps log): memory.used = torch allocated + torch's
cache + what lives outside torch (CUDA context, workspaces, other processes).

Exit status: the one policy of analyze and check on the same logs: 1 when
a finding is at error severity (a leak: smi.leak), 0 otherwise (a zombie,
memory high or a starved GPU are warnings; a process that grows is shown,
not judged), 2 when a file cannot be read. --threshold is smi.memory-high's
threshold and --min-growth-duration how growth is measured, for the
findings and the verdict alike.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, formatTable, formatJSON, formatMarkdown); err != nil {
				return err
			}
			if opts.Threshold <= 0 || opts.Threshold > 1 {
				return badInput(fmt.Errorf("--threshold %v: want a fraction of memory.total in (0, 1]", opts.Threshold))
			}
			if minGrowD <= 0 {
				return badInput(fmt.Errorf("--min-growth-duration %v: want a positive duration", minGrowD))
			}
			opts.MinGrowthDuration = minGrowD
			// One Evaluation of every log given, with the flags as the
			// smi rules' options and thresholds: the tables render its
			// memoized analyses and the exit status is its own, so smi,
			// analyze and check agree on the same logs.
			q := question{command: "smi", kinds: []load.Kind{load.SMI, load.SMIApps}, fallback: load.SMI,
				options: rules.Options{Rules: rules.DefaultRuleSet(), SMI: &opts}}
			if gpu != "" {
				q.check = func(ins []*rules.Input) error { return onlyGPU(ins, gpu) }
			}
			q.limits = limitsOf(cmd)
			ev, err := answer(cmd.ErrOrStderr(), args, q)
			if err != nil {
				return err
			}
			if err := report.Generate(cmd.OutOrStdout(), report.New(ev, report.Options{View: report.ViewSMI, Format: format})); err != nil {
				return err
			}
			return exitOf(ev, q.gate) // the one exit policy
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", formatTable, "output format: table or json")
	f.StringVar(&gpu, "gpu", "", "only this GPU: its index (or PCI bus id / UUID when the log has no index)")
	f.Float64Var(&opts.Threshold, "threshold", opts.Threshold, "alarm when memory.used exceeds this fraction of memory.total")
	f.DurationVar(&minGrowD, "min-growth-duration", opts.MinGrowthDuration, "shortest steady growth reported as a leak")
	return cmd
}

// onlyGPU keeps one GPU of each nvidia-smi log (--gpu), the loaded log
// left whole.
func onlyGPU(ins []*rules.Input, gpu string) error {
	for _, in := range ins {
		if !in.Has(rules.SourceSMI) {
			continue
		}
		g := in.SMI.GPU(gpu)
		if g == nil {
			var keys []string
			for _, g := range in.SMI.GPUs {
				keys = append(keys, g.Key)
			}
			return fmt.Errorf("%s: no GPU %q in the log (it has %s)", in.Source, gpu, strings.Join(keys, ", "))
		}
		one := *in.SMI
		one.GPUs = []*smi.GPU{g}
		in.SMI = &one
	}
	return nil
}
