package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newDiffCmd) }

type diffOptions struct {
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

// diffGroup is the inputs of one kind and rank on one side of a diff.
type diffGroup struct {
	kind   load.Kind
	rank   int64
	inputs []*rules.Input
}

// loadSide reads one side of a diff (a trace, a snapshot, or a directory
// of them) and groups its inputs by kind and rank: several traces of one
// rank (profiling windows) are compared as one.
func loadSide(arg string, stderr io.Writer) ([]*diffGroup, error) {
	files, err := loadFiles(stderr, []string{arg}, "diff", load.Trace, load.Trace, load.Snapshot, load.Summarized)
	if err != nil {
		return nil, err
	}
	files = summariesOf(files, load.Trace, load.Snapshot)
	if len(files) == 0 {
		return nil, badInput(fmt.Errorf("%s: no summary of a trace or a snapshot here", arg))
	}
	var groups []*diffGroup
	for _, f := range files {
		kind := f.Kind
		if f.Summarized != nil {
			kind = load.Kind(f.Summarized.Kind) // a summary pairs like its file
		}
		var g *diffGroup
		for _, h := range groups {
			if h.kind == kind && h.rank == f.Rank {
				g = h
			}
		}
		if g == nil {
			g = &diffGroup{kind: kind, rank: f.Rank}
			groups = append(groups, g)
		}
		in, err := ruleInput(f)
		if err != nil {
			return nil, err
		}
		g.inputs = append(g.inputs, in)
	}
	return groups, nil
}

// side reduces a group to what a diff compares.
func (g *diffGroup) side(arg string, rs rules.RuleSet) *rules.DiffSide {
	source := arg
	if len(g.inputs) == 1 {
		source = g.inputs[0].Source
	} else if g.rank >= 0 {
		source = fmt.Sprintf("%s (rank %d)", arg, g.rank)
	}
	return rules.DiffSideOf(source, rules.Evaluate(rs, g.inputs, rules.EvalOptions{}))
}

func kindOrder(k load.Kind) int {
	if k == load.Trace {
		return 0
	}
	return 1
}

// diffPair is what is compared: base and head inputs of one kind and rank.
type diffPair struct{ base, head *diffGroup }

// pairSides pairs the groups of both sides by kind and rank. When a kind
// has one group on each side, they pair whatever their ranks (two single
// files). Groups without a counterpart are named in a warning.
func pairSides(base, head []*diffGroup, baseArg, headArg string, warn func(string)) []diffPair {
	var pairs []diffPair
	used := map[*diffGroup]bool{}
	// Indexed by kind and rank, so that thousands of ranks pair in linear
	// time (a nested scan was cubic).
	type key struct {
		kind load.Kind
		rank int64
	}
	count := map[load.Kind][2]int{}
	heads := map[key][]*diffGroup{}
	onlyHead := map[load.Kind]*diffGroup{}
	for _, b := range base {
		c := count[b.kind]
		c[0]++
		count[b.kind] = c
	}
	for _, h := range head {
		c := count[h.kind]
		c[1]++
		count[h.kind] = c
		heads[key{h.kind, h.rank}] = append(heads[key{h.kind, h.rank}], h)
		onlyHead[h.kind] = h
	}
	// Traces first: they say the most.
	slices.SortStableFunc(base, func(a, b *diffGroup) int { return cmp.Compare(kindOrder(a.kind), kindOrder(b.kind)) })
	for _, b := range base {
		var h *diffGroup
		if c := count[b.kind]; c[0] == 1 && c[1] == 1 {
			h = onlyHead[b.kind] // two single files pair whatever their ranks
		} else if q := heads[key{b.kind, b.rank}]; len(q) > 0 {
			h, heads[key{b.kind, b.rank}] = q[0], q[1:]
		}
		if h != nil && !used[h] {
			pairs = append(pairs, diffPair{b, h})
			used[b], used[h] = true, true
		}
	}
	for _, side := range []struct {
		arg, other string
		gs         []*diffGroup
	}{{baseArg, headArg, base}, {headArg, baseArg, head}} {
		for _, g := range side.gs {
			if !used[g] {
				warn(fmt.Sprintf("%s: no %s of rank %d in %s to compare with", g.inputs[0].Source, g.kind, g.rank, side.other))
			}
		}
	}
	return pairs
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
	base, err := loadSide(baseArg, stderr)
	if err != nil {
		return err
	}
	head, err := loadSide(headArg, stderr)
	if err != nil {
		return err
	}
	pairs := pairSides(base, head, baseArg, headArg, func(msg string) { fmt.Fprintf(stderr, "torchmem: warning: %s\n", msg) })
	if len(pairs) == 0 {
		return badInput(fmt.Errorf("%s and %s have nothing in common to compare (traces pair with traces, snapshots with snapshots, rank with rank)", baseArg, headArg))
	}
	// Each pair's comparison and what it concludes (rules.CompareSides:
	// the gates and the headline).
	gates := rules.DiffGates{Leak: leakGate, LeakThreshold: leakThreshold, Budgets: budgets}
	var answers []report.DiffPair
	passed := true
	for _, p := range pairs {
		a := rules.CompareSides(p.base.side(baseArg, rs), p.head.side(headArg, rs), gates, o.top)
		passed = passed && a.Passed()
		answers = append(answers, report.DiffPair{Answer: a, Base: p.base.inputs, Head: p.head.inputs})
	}
	if o.output != "" {
		// The HTML page shows the first pair.
		if err := writeFile(o.output, func(f *os.File) error {
			return report.Generate(f, report.NewDiff(answers[:1], report.Options{Format: report.HTML, Version: version}))
		}); err != nil {
			return err
		}
	}
	if err := report.Generate(stdout, report.NewDiff(answers, report.Options{Format: o.format})); err != nil {
		return err
	}
	if !passed {
		return findings()
	}
	return nil
}
