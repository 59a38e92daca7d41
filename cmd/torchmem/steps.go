package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline"
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
			files, err := loadFiles(cmd.ErrOrStderr(), args, "steps", load.Steps, load.Steps, load.Summary)
			if err != nil {
				return err
			}
			return eachInput(cmd.OutOrStdout(), format, files, func(out io.Writer, f *load.File) error {
				// The fit is the Evaluation's (the same memoized analysis,
				// with this command's --warmup), and so is the exit code.
				in := ruleInput(f)
				in.StepOptions = &opts
				ev := rules.Evaluate(rules.DefaultRuleSet(), []*rules.Input{in}, rules.EvalOptions{})
				path, log, a := f.Path, in.StepLog, in.StepAnalysis()
				if format == formatJSON {
					if err := writeJSON(out, stepsJSONReport(path, log, a)); err != nil {
						return err
					}
					return stepsExit(ev)
				}
				if format == formatMarkdown {
					if err := writeMarkdownFenced(out, path, func(w io.Writer) error { renderStepsTable(w, path, log, a); return nil }); err != nil {
						return err
					}
					return stepsExit(ev)
				}
				renderStepsTable(out, path, log, a)
				return stepsExit(ev)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", formatTable, "output format: table or json")
	f.IntVar(&opts.WarmupSteps, "warmup", opts.WarmupSteps, "leading steps left out of the fit (optimizer state is created in step 0)")
	return cmd
}

// stepsSignedBytes prints a per-step change with its sign.
func stepsSignedBytes(b int64) string {
	if b > 0 {
		return "+" + memtimeline.FormatBytes(b)
	}
	return memtimeline.FormatBytes(b)
}

func stepsKeyList(log *steplog.Log) string {
	var parts []string
	for q, k := range log.Keys {
		parts = append(parts, q+"="+k)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func renderStepsTable(w io.Writer, path string, log *steplog.Log, a steplog.Analysis) {
	fmt.Fprintf(w, "%s: %d records; keys %s\n", path, log.Lines, stepsKeyList(log))
	t := newTableWriter()
	t.AppendHeader(table.Row{"device", "steps", "verdict", "allocated per step", "pattern", "fit R^2", "allocated first → last", "peak allocated (step)", "reserved per step", "peak reserved (step)"})
	for _, s := range a.Series {
		dev := s.Device
		if dev == "" {
			dev = "-"
		}
		steps := fmt.Sprintf("%d-%d", s.FirstStep, s.LastStep)
		perStep, r2, span, pattern := "-", "-", "-", "-"
		if g := s.Growth; g != nil {
			pattern = fmt.Sprintf("every step, %d..%d", g.FirstStep, g.LastStep)
			if g.Period > 1 {
				pattern = fmt.Sprintf("every %d steps, %d..%d", g.Period, g.FirstStep, g.LastStep)
			}
			if g.Bounded {
				pattern += ", then flat"
			}
		}
		if s.Allocated.FitSteps >= 2 {
			perStep = stepsSignedBytes(s.BytesPerStep)
			r2 = fmt.Sprintf("%.3f", s.Allocated.R2)
			span = memtimeline.FormatBytes(s.Allocated.FirstBytes) + " → " + memtimeline.FormatBytes(s.Allocated.LastBytes)
		}
		resPerStep, resPeak := "-", "-"
		if s.Reserved != nil && s.Reserved.FitSteps >= 2 {
			resPerStep = stepsSignedBytes(int64(s.Reserved.SlopeBytesPerStep))
		}
		if s.PeakReservedBytes >= 0 {
			resPeak = fmt.Sprintf("%s (%d)", memtimeline.FormatBytes(s.PeakReservedBytes), s.PeakReservedStep)
		}
		t.AppendRow(table.Row{dev, steps, s.Verdict, perStep, pattern, r2, span,
			fmt.Sprintf("%s (%d)", memtimeline.FormatBytes(s.PeakAllocatedBytes), s.PeakAllocatedStep), resPerStep, resPeak})
	}
	fmt.Fprintln(w, t.Render())
	for _, s := range a.Series {
		prefix := ""
		if s.Device != "" {
			prefix = "device " + s.Device + ": "
		}
		warm := ""
		if s.SkippedWarmup > 0 {
			warm = fmt.Sprintf(" (first %d step(s) left out as warm-up)", s.SkippedWarmup)
		}
		fmt.Fprintf(w, "%s%s: %s%s\n", prefix, s.Verdict, s.Reason, warm)
	}
}

type stepsTrendJSON struct {
	FitSteps          int      `json:"fit_steps"`
	SlopeBytesPerStep float64  `json:"slope_bytes_per_step"`
	R2                float64  `json:"r2"`
	BytesPerSecond    *float64 `json:"bytes_per_second"`
	FirstBytes        int64    `json:"first_bytes"`
	LastBytes         int64    `json:"last_bytes"`
	GrowthBytes       int64    `json:"growth_bytes"`
}

type stepsSeriesJSON struct {
	Device             string          `json:"device"`
	Records            int             `json:"records"`
	FirstStep          int64           `json:"first_step"`
	LastStep           int64           `json:"last_step"`
	SkippedWarmup      int             `json:"skipped_warmup_steps"`
	Verdict            string          `json:"verdict"`
	BytesPerStep       int64           `json:"bytes_per_step"`
	Reason             string          `json:"reason"`
	Growth             *steplog.Growth `json:"growth"`
	Allocated          stepsTrendJSON  `json:"allocated"`
	Reserved           *stepsTrendJSON `json:"reserved"`
	PeakAllocatedBytes int64           `json:"peak_allocated_bytes"`
	PeakAllocatedStep  int64           `json:"peak_allocated_step"`
	PeakReservedBytes  *int64          `json:"peak_reserved_bytes"`
	PeakReservedStep   *int64          `json:"peak_reserved_step"`
	MaxAllocatedBytes  *int64          `json:"max_allocated_bytes_logged"`
}

type stepsReportJSON struct {
	File     string            `json:"file"`
	Records  int               `json:"records"`
	Keys     map[string]string `json:"keys"`
	Warnings []string          `json:"warnings"`
	Options  map[string]any    `json:"options"`
	Series   []stepsSeriesJSON `json:"series"`
}

func stepsTrend(t steplog.Trend) stepsTrendJSON {
	j := stepsTrendJSON{FitSteps: t.FitSteps, SlopeBytesPerStep: smiRound(t.SlopeBytesPerStep, 1), R2: smiRound(t.R2, 4),
		FirstBytes: t.FirstBytes, LastBytes: t.LastBytes, GrowthBytes: t.GrowthBytes}
	if t.HasTime {
		v := smiRound(t.BytesPerSecond, 0)
		j.BytesPerSecond = &v
	}
	return j
}

func stepsJSONReport(path string, log *steplog.Log, a steplog.Analysis) stepsReportJSON {
	o := a.Options
	rep := stepsReportJSON{File: path, Records: log.Lines, Keys: log.Keys, Warnings: log.Warnings,
		Options: map[string]any{"warmup_steps": o.WarmupSteps, "min_fit_steps": o.MinFitSteps,
			"min_consecutive_rises": steplog.MinConsecutiveRises, "min_periodic_rises": steplog.MinPeriodicRises},
		Series: []stepsSeriesJSON{}}
	if rep.Warnings == nil {
		rep.Warnings = []string{}
	}
	for _, s := range a.Series {
		j := stepsSeriesJSON{Device: s.Device, Records: s.Records, FirstStep: s.FirstStep, LastStep: s.LastStep,
			SkippedWarmup: s.SkippedWarmup, Verdict: s.Verdict, BytesPerStep: s.BytesPerStep, Reason: s.Reason, Growth: s.Growth,
			Allocated: stepsTrend(s.Allocated), PeakAllocatedBytes: s.PeakAllocatedBytes, PeakAllocatedStep: s.PeakAllocatedStep,
			MaxAllocatedBytes: smiOptBytes(s.MaxAllocatedBytes)}
		if s.Reserved != nil {
			r := stepsTrend(*s.Reserved)
			j.Reserved = &r
		}
		if s.PeakReservedBytes >= 0 {
			b, st := s.PeakReservedBytes, s.PeakReservedStep
			j.PeakReservedBytes, j.PeakReservedStep = &b, &st
		}
		rep.Series = append(rep.Series, j)
	}
	return rep
}

// stepsExit is the exit policy every command follows, from the
// Evaluation: findings (exit 1) when one is at error severity.
func stepsExit(ev *rules.Evaluation) error {
	if ev.ExitCode() == rules.ExitFindings {
		return findings()
	}
	return nil
}
