package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/leak"
)

func init() { subcommands = append(subcommands, newLeaksCmd) }

type leaksOptions struct {
	device   int
	minBytes int64
	steady   int
	depth    int
	top      int
	format   string
}

func newLeaksCmd() *cobra.Command {
	o := &leaksOptions{}
	def := leak.DefaultOptions()
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

Exit status: 0 clean or unknown, 1 a leak was found, 2 bad input.`,
		Example: `  torchmem leaks trace.json.gz
  torchmem leaks traces/ --format json
  torchmem leaks trace.json.gz --min-bytes-per-step 65536`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLeaks(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.device, "device", -1, "only this GPU index (-1 = all)")
	f.Int64Var(&o.minBytes, "min-bytes-per-step", def.MinBytesPerStep, "kept for compatibility: the verdict does not depend on size (check's memory.leak threshold sets error vs warning)")
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
	Report leak.Report
}

// rankLeakJSON is one rank in the multi-input JSON shape.
type rankLeakJSON struct {
	Rank  int64  `json:"rank"`
	Trace string `json:"trace"`
	leak.Report
	// Outlier is true for the rank whose verdict differs from the others.
	Outlier bool `json:"outlier"`
}

func runLeaks(stdout, stderr io.Writer, args []string, o *leaksOptions) error {
	def := leak.DefaultOptions()
	if err := checkFormat(o.format, formatTable, formatJSON, formatMarkdown); err != nil {
		return err
	}
	// With the default options, many inputs are read into summaries to
	// bound memory (their leak reports are made with those options).
	bounded := o.device == def.Device && o.depth == def.Depth && o.minBytes == def.MinBytesPerStep && o.steady == def.SteadySteps
	all, err := loadFilesBounded(stderr, args, "leaks", bounded, load.Trace, load.Trace, load.Snapshot, load.Steps, load.SMI, load.SMIApps, load.Summarized)
	if err != nil {
		return err
	}
	all = summariesOf(all, load.Trace, load.Snapshot, load.Steps, load.SMI)
	// Every file feeds the verdict of its run and rank; traces and
	// snapshots (or their summaries) also get their own report below it.
	var files []*load.File
	var ins []*rules.Input
	summaries := 0
	for _, f := range all {
		ins = append(ins, ruleInput(f))
		if f.Trace != nil || f.Snapshot != nil || f.Summarized != nil && f.Summarized.Leaks != nil {
			files = append(files, f)
		}
		if f.Summarized != nil {
			summaries++
		}
	}
	if summaries > 0 && !bounded {
		fmt.Fprintf(stderr, "torchmem: warning: summaries hold the leak analysis made with the default options (--device, --depth and --min-bytes-per-step apply to traces)\n")
	}
	verdicts := rules.JudgeAll(ins)
	opts := leak.Options{Device: o.device, MinBytesPerStep: o.minBytes, SteadySteps: o.steady, Depth: o.depth, MinSteps: leak.DefaultOptions().MinSteps}
	results := make([]leakResult, len(files))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := leakResult{Path: f.Path, Rank: f.Rank}
			if s := f.Summarized; s != nil {
				r.Path, r.Report = s.Source, *s.Leaks
			} else if f.Snapshot != nil {
				r.Report = leak.AnalyzeSnapshot(snapshot.Analyze(f.Snapshot, 0), opts)
			} else {
				r.Report = leak.Analyze(leak.TraceData(f.Trace, opts.Device), opts)
			}
			results[i] = r
		}()
	}
	wg.Wait()
	for i := range results {
		if o.top > 0 && len(results[i].Report.Suspects) > o.top {
			results[i].Report.Suspects = results[i].Report.Suspects[:o.top]
		}
	}
	verdictsOf := make([]string, len(results))
	for i, r := range results {
		verdictsOf[i] = r.Report.Verdict
	}
	outliers := rules.MinorityOutliers(verdictsOf)
	cross := rules.CompareRanks(verdicts)
	leaking := false
	for _, r := range results {
		leaking = leaking || r.Report.Verdict == leak.VerdictLeak
	}
	for _, v := range verdicts {
		leaking = leaking || v.Leak.Verdict == leak.VerdictLeak
	}

	switch {
	case o.format == formatJSON && len(results) == 1 && len(all) == 1:
		if err := writeJSON(stdout, results[0].Report); err != nil {
			return err
		}
	case o.format == formatJSON:
		out := struct {
			Verdicts []rules.Verdict `json:"verdicts"`
			// CrossRank compares the ranks (null with fewer than two).
			CrossRank *rules.CrossRank `json:"cross_rank"`
			Ranks     []rankLeakJSON   `json:"ranks"`
		}{Verdicts: verdicts, CrossRank: cross}
		for i, r := range results {
			out.Ranks = append(out.Ranks, rankLeakJSON{Rank: r.Rank, Trace: r.Path, Report: r.Report, Outlier: outliers[i]})
		}
		if err := writeJSON(stdout, out); err != nil {
			return err
		}
	default:
		if len(all) > 1 {
			// One verdict per run and rank, from all of its files.
			if o.format == formatMarkdown {
				writeVerdictMarkdown(stdout, verdicts)
			} else {
				writeVerdictText(stdout, verdicts, termWidth())
			}
		}
		switch {
		case cross != nil:
			writeCrossRank(stdout, cross, o.format)
		case len(results) > 1:
			writeRankSummary(stdout, results, outliers, o.format)
		}
		for _, r := range results {
			writeLeakReport(stdout, r, o.format)
		}
	}
	if leaking {
		return findings()
	}
	return nil
}

func writeRankSummary(w io.Writer, results []leakResult, outliers []bool, format string) {
	tw := newTableWriter()
	tw.AppendHeader(table.Row{"Rank", "Trace", "Verdict", "Growth per step", ""})
	for i, r := range results {
		mark := ""
		if outliers[i] {
			mark = "differs from the other ranks"
		}
		rank := "-"
		if r.Rank >= 0 {
			rank = fmt.Sprint(r.Rank)
		}
		tw.AppendRow(table.Row{rank, r.Path, r.Report.Verdict, memtimeline.FormatBytes(r.Report.GrowthBytesPerStep), mark})
	}
	renderTable(w, tw, format)
	fmt.Fprintln(w)
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
	if rep.Verdict == leak.VerdictLeak {
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
	if len(rep.Suspects) > 0 && rep.Verdict != leak.VerdictClean {
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
