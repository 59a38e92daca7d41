package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newDiffCmd) }

type diffOptions struct {
	limits        chrometrace.Limits // the readers' caps (the --max-* flags)
	failIf        []string
	leakThreshold string
	rulesFile     string
	format        string
	top           int
	output        string
}

func newDiffCmd() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff BASE HEAD",
		Short: "What a change did to GPU memory: peaks, growth, and the operators and lines that moved",
		Long: `Compares two runs, each a trace, an allocator snapshot, or a directory of them
(the snippet's output, per-rank traces). Inputs pair by kind and rank: rank 1's
trace with rank 1's, snapshot with snapshot (several trace windows of one rank
count as one); each pair gets its own comparison. For each: peak allocated and reserved (absolute and %), growth per step and leak
verdicts side by side, the operators (Self CUDA Mem) and allocation sites
(file:line) whose bytes moved most, and leak suspects that are new in HEAD.
Operators match by name and sites by your innermost line and operator, so two
runs of different lengths still compare; steps match by their position in the
profiled window.

--fail-if sets a budget (repeatable; also 'diff: fail_if: [...]' in the rules
YAML): METRIC>+N% (relative to BASE), METRIC>+N<unit> (increase), METRIC>N<unit>
(HEAD's value), with METRIC one of peak_allocated, peak_reserved,
growth_per_step, new_suspects.

The leak gate needs no flag: diff exits 1 when HEAD leaks and BASE does not,
or when HEAD has a leak suspect BASE lacks that keeps at least the leak
threshold per step (the memory.leak rule's threshold, 1 MiB by default; set it
with --leak-threshold or in the rules YAML; disabling memory.leak there turns
the leak gate off).

Exit status: 0 no new leak and within budget, 1 a new leak or over budget, 2
bad input.`,
		Example: `  torchmem diff main.json.gz pr.json.gz
  torchmem diff base/ head/ --fail-if "peak_allocated>+5%" --fail-if "new_suspects>0"
  torchmem diff base.json.gz head.json.gz --format markdown >> "$GITHUB_STEP_SUMMARY"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limits = limitsOf(cmd)
			return runDiff(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1], o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.failIf, "fail-if", nil, `budget condition, e.g. "peak_allocated>+5%" (repeatable)`)
	f.StringVar(&o.rulesFile, "rules", "", "YAML config whose diff.fail_if conditions and memory.leak threshold apply too")
	f.StringVar(&o.leakThreshold, "leak-threshold", "", `bytes per step at which a new leak suspect fails the diff, e.g. "512KiB" (default: the memory.leak rule's threshold)`)
	f.StringVar(&o.format, "format", formatText, "output format: text, json, markdown")
	f.IntVar(&o.top, "top", 10, "movers shown per table")
	f.StringVarP(&o.output, "output", "o", "", "also write an HTML page with both memory timelines overlaid")
	return cmd
}

func runDiff(stdout, stderr io.Writer, baseArg, headArg string, o *diffOptions) error {
	if err := checkFormat(o.format, formatText, formatJSON, formatMarkdown); err != nil {
		return err
	}
	if err := checkOutput(o.output, []string{baseArg, headArg}); err != nil {
		return err
	}
	conds := append([]string(nil), o.failIf...)
	rs, cfg, err := loadRules(o.rulesFile)
	if err != nil {
		return err
	}
	if cfg != nil {
		conds = append(conds, cfg.Diff.FailIf...)
	}
	leakGate, leakThreshold := false, int64(0)
	for _, r := range rs.Rules {
		if r.ID == rules.RuleLeak {
			leakGate, leakThreshold = true, int64(r.Threshold)
		}
	}
	if o.leakThreshold != "" {
		v, err := memtimeline.ParseBytes(o.leakThreshold)
		if err != nil {
			return badInput(fmt.Errorf("--leak-threshold: %w", err))
		}
		leakGate, leakThreshold = true, v
	}
	var budgets []rules.DiffBudget
	for _, c := range conds {
		b, err := rules.ParseBudget(c)
		if err != nil {
			return badInput(fmt.Errorf("--fail-if: %w", err))
		}
		budgets = append(budgets, b)
	}
	// Each pair's comparison and what it concludes (the gates and the
	// headline) is the Evaluation's: a failed gate is a finding at error
	// severity, and diff exits by the one policy.
	q := question{command: "diff", kinds: []load.Kind{load.Trace, load.Snapshot, load.Summarized}, fallback: load.Trace,
		options: rules.Options{Rules: rs, Page: o.output != "", Compare: &rules.CompareQuery{Gates: rules.DiffGates{Leak: leakGate, LeakThreshold: leakThreshold, Budgets: budgets}, Top: o.top}}}
	q.limits = o.limits
	ev, err := answer(stderr, []string{baseArg, headArg}, q)
	if err != nil {
		return err
	}
	if o.output != "" {
		// The HTML page shows the first pair.
		if err := writeFile(o.output, func(f *os.File) error {
			return report.Generate(f, report.New(ev, report.Options{View: report.ViewDiff, Format: report.HTML, Version: version}))
		}); err != nil {
			return err
		}
	}
	if err := report.Generate(stdout, report.New(ev, report.Options{View: report.ViewDiff, Format: o.format})); err != nil {
		return err
	}
	return exitOf(ev, q.gate)
}
