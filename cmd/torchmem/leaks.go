package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newLeaksCmd) }

type leaksOptions struct {
	rulesFile string
	device    int
	minBytes  int64
	steady    int
	depth     int
	top       int
	format    string
}

func newLeaksCmd() *cobra.Command {
	o := &leaksOptions{}
	def := rules.DefaultLeakOptions()
	cmd := &cobra.Command{
		Use:   "leaks INPUT...",
		Short: "Does GPU memory leak step over step, how fast, and which line keeps it",
		Long: `Pairs every GPU allocation in the trace with its free and asks, step by step
(ProfilerStep#N), which blocks each step leaves alive at the end of the trace.

A site that keeps memory from each of at least 3 consecutive steps, the same
amount every step (or more every step: accelerating), is a leak at any size;
one that starts mid-window is found from where it starts. Memory made once
(parameters, optimizer state, accumulated gradients) or by the last step or two
(outputs, gradients), and rolling buffers that free what they kept, are not.
Each leak has a kind (container, autograd_graph, retain_graph, hook, unknown)
with its evidence and fix, its bytes per step, and its sites with the call
chain from the outermost frame down to the allocating one.

INPUT is a trace, several traces, or a directory of per-rank traces (rank read
from distributedInfo or from "rank<N>" in the file name); ranks are analysed in
parallel and a rank whose verdict differs from the others is named.

` + exitPolicy,
		Example: `  torchmem leaks trace.json.gz
  torchmem leaks traces/ --format json
  torchmem leaks trace.json.gz --min-bytes-per-step 65536`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLeaks(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.rulesFile, "rules", "", "YAML file with rule thresholds, severities and disabled rules (as for check: the same verdict and exit code)")
	f.IntVar(&o.device, "device", -1, "only this GPU index (-1 = all)")
	sizeVar(f, &o.minBytes, "min-bytes-per-step", def.MinBytesPerStep, "kept for compatibility: the verdict does not depend on size (check's memory.leak threshold sets error vs warning)")
	f.IntVar(&o.steady, "steady-steps", def.SteadySteps, "final steps marked as steady state in the step table")
	f.IntVar(&o.depth, "depth", def.Depth, "innermost user frames kept per suspect chain (0 = the whole chain)")
	f.IntVar(&o.top, "top", 5, "suspects shown per input (0 = all)")
	f.StringVar(&o.format, "format", formatTable, "output format: table, json, markdown")
	return cmd
}

// leakResult is one input's report.
type leakResult struct {
	Path   string
	Rank   int64
	Report rules.LeakReport
}

// rankLeakJSON is one file's leak report in --format json.
type rankLeakJSON struct {
	Rank  int64  `json:"rank"`
	Trace string `json:"trace"`
	rules.LeakReport
	// Outlier is true for a file of a rank the cross-rank view names.
	Outlier bool `json:"outlier"`
}

func runLeaks(stdout, stderr io.Writer, args []string, o *leaksOptions) error {
	def := rules.DefaultLeakOptions()
	if err := checkFormat(o.format, formatTable, formatJSON, formatMarkdown); err != nil {
		return err
	}
	// With the default options, many inputs are read into summaries to
	// bound memory (their leak reports are made with those options).
	rs, _, err := loadRules(o.rulesFile)
	if err != nil {
		return err
	}
	bounded := o.device == def.Device && o.depth == def.Depth && o.minBytes == def.MinBytesPerStep && o.steady == def.SteadySteps && o.rulesFile == ""
	// The same inputs as every answering command reads, so that the
	// verdict is the same.
	ins, err := loadRuleInputs(stderr, args, "leaks", bounded)
	if err != nil {
		return err
	}
	if !bounded && slices.ContainsFunc(ins, func(in *rules.Input) bool { return in.Digest != nil }) {
		fmt.Fprintf(stderr, "torchmem: warning: summaries hold the leak analysis made with the default options (--device, --depth and --min-bytes-per-step apply to traces)\n")
	}
	// The answer (verdicts, findings, exit code) is the one every command
	// gives; the per-file reports below are made with this command's
	// options, through the same memo (the defaults are computed once).
	ev := rules.Evaluate(rs, ins, rules.EvalOptions{})
	if ev.Unmeasured != nil {
		return badInput(ev.Unmeasured)
	}
	opts := rules.LeakOptions{Device: o.device, MinBytesPerStep: o.minBytes, SteadySteps: o.steady, Depth: o.depth, MinSteps: def.MinSteps}
	var results []leakResult
	for _, in := range ins {
		r := leakResult{Path: in.Source, Rank: in.Rank}
		switch {
		case in.Digest != nil && in.Digest.Leaks != nil:
			r.Report = *in.Digest.Leaks
		case in.Snapshot != nil:
			r.Report = in.SnapshotLeaksWith(opts)
		case in.Trace != nil:
			r.Report = in.LeaksWith(opts)
		default:
			continue // a log: its evidence is in the verdict
		}
		if o.top > 0 && len(r.Report.Suspects) > o.top {
			r.Report.Suspects = r.Report.Suspects[:o.top]
		}
		results = append(results, r)
	}
	outlier := outlierFiles(ev)

	switch o.format {
	case formatJSON:
		out := struct {
			Verdicts []rules.Verdict `json:"verdicts"`
			// CrossRank compares the ranks (null with fewer than two).
			CrossRank *rules.CrossRank `json:"cross_rank"`
			Ranks     []rankLeakJSON   `json:"ranks"`
		}{Verdicts: ev.Verdicts, CrossRank: ev.CrossRank, Ranks: []rankLeakJSON{}}
		for _, r := range results {
			out.Ranks = append(out.Ranks, rankLeakJSON{Rank: r.Rank, Trace: r.Path, LeakReport: r.Report, Outlier: outlier[r.Path]})
		}
		if err := writeJSON(stdout, out); err != nil {
			return err
		}
	default:
		// One verdict per run and rank, from all of its files.
		if o.format == formatMarkdown {
			writeVerdictMarkdown(stdout, ev.Verdicts)
		} else {
			writeVerdictText(stdout, ev.Verdicts, termWidth())
		}
		writeCrossRank(stdout, ev.CrossRank, o.format)
		for _, r := range results {
			writeLeakReport(stdout, r, o.format)
		}
	}
	return exitOf(ev)
}

// outlierFiles are the files of the ranks the cross-rank view names.
func outlierFiles(ev *rules.Evaluation) map[string]bool {
	out := map[string]bool{}
	if ev.CrossRank == nil {
		return out
	}
	for _, v := range ev.Verdicts {
		if v.Rank >= 0 && slices.Contains(ev.CrossRank.Outliers, v.Rank) {
			for _, s := range v.Sources {
				out[s] = true
			}
		}
	}
	return out
}
func writeLeakReport(w io.Writer, r leakResult, format string) {
	rep := r.Report
	title := r.Path
	if r.Rank >= 0 {
		title = fmt.Sprintf("%s (rank %d)", r.Path, r.Rank)
	}
	reason := rep.Reason
	if format == formatMarkdown {
		reason = mdEscape(reason)
		fmt.Fprintf(w, "### %s\n\n**Verdict: %s**", mdEscape(title), rep.Verdict)
	} else {
		fmt.Fprintf(w, "%s\nVerdict: %s", title, strings.ToUpper(rep.Verdict))
	}
	if rep.Verdict == rules.LeakVerdictLeak {
		fmt.Fprintf(w, ", %s per step", memtimeline.FormatBytes(rep.GrowthBytesPerStep))
	}
	fmt.Fprintf(w, "\n%s\n\n", reason)
	if len(rep.Steps) > 0 {
		tw := newTableWriter()
		tw.AppendHeader(table.Row{"Step", "Allocated in step", "Still alive at end", "Blocks", ""})
		for _, s := range rep.Steps {
			note := ""
			if s.Steady && !rep.WholeWindow {
				note = "steady state"
			}
			tw.AppendRow(table.Row{s.Name, memtimeline.FormatBytes(s.AllocBytes), memtimeline.FormatBytes(s.SurvivorBytes), s.SurvivorBlocks, note})
		}
		tw.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}})
		renderTable(w, tw, format)
	}
	for i, l := range rep.Leaks {
		accel := ""
		if l.Accelerating {
			accel = fmt.Sprintf(", accelerating (+%s per step each step)", memtimeline.FormatBytes(l.AccelerationBytes))
		}
		esc, nl := func(s string) string { return s }, "\n"
		if format == formatMarkdown {
			esc, nl = mdEscape, "  \n"
		}
		fmt.Fprintf(w, "\nLeak %d: %s, %s per step, steps #%d..#%d%s, %d site(s)%s  why: %s%s  fix: %s%s",
			i+1, l.Kind, memtimeline.FormatBytes(l.BytesPerStep), l.FirstStep, l.LastStep, accel, len(l.Sites), nl, esc(l.Evidence), nl, esc(l.Fix), nl)
		if len(l.Sites) > 0 && l.Sites[0].HoldingLine != "" {
			fmt.Fprintf(w, "  holding line: %s%s", esc(l.Sites[0].HoldingLine), nl)
		}
		if len(l.Sites) > 0 && len(l.Sites[0].Stack) > 0 {
			fmt.Fprintf(w, "  held through (outermost first): %s%s", esc(strings.Join(l.Sites[0].Stack, " > ")), nl)
			if n := l.Sites[0].StackNote; n != "" {
				fmt.Fprintf(w, "  (%s)%s", esc(n), nl)
			}
		}
	}
	if len(rep.Suspects) > 0 && rep.Verdict != rules.LeakVerdictClean {
		fmt.Fprintln(w)
		tw := newTableWriter()
		tw.AppendHeader(table.Row{"Per step", "Blocks", "Steps", "Kind", "Call chain (outermost first)", "Operator"})
		for _, s := range rep.Suspects {
			stack := slices.Clone(s.Stack)
			if len(stack) == 0 {
				stack = []string{"(no Python stack)"}
			}
			sep := "\n"
			if format != formatTable {
				sep = " → "
			}
			op := s.Operator
			if s.ForwardOp != "" {
				op += " (backward of " + s.ForwardOp + ")"
			}
			perStep := memtimeline.FormatBytes(s.BytesPerStep)
			if rep.WholeWindow {
				perStep = memtimeline.FormatBytes(s.Bytes) + " total"
			}
			steps := fmt.Sprintf("#%d..#%d", s.FirstStep, s.LastStep)
			if rep.WholeWindow || s.FirstStep < 0 {
				steps = fmt.Sprintf("%d steps", s.StepsWithSurvivors)
			}
			if rep.WholeWindow {
				steps = "-"
			}
			kind := s.Kind
			if s.Accelerating {
				kind += ", accelerating"
			}
			tw.AppendRow(table.Row{perStep, s.Blocks, steps, kind, strings.Join(stack, sep), strings.ReplaceAll(op, " > ", sep+"> ")})
		}
		renderTable(w, tw, format)
	}
	fmt.Fprintln(w)
}
