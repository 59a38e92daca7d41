package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newAnalyzeCmd) }

type analyzeOptions struct {
	rulesFile string
	format    string
	top       int
	output    string
}

func newAnalyzeCmd() *cobra.Command {
	o := &analyzeOptions{}
	cmd := &cobra.Command{
		Use:   "analyze INPUT...",
		Short: "The one-screen diagnosis: where memory went, leaks, fragmentation, GPU timeline, what to do",
		Long: `Reads every input (traces, per-rank directories, allocator snapshots, nvidia-smi
logs, per-step memory logs; each recognized by its content) and prints what a
user checks first: the run's summary, the operators and Python lines that
allocate the most, the leak verdict, the fragmentation signs, GPU-timeline
problems (a sync every step, pageable copies, idle gaps), and every finding of
the rules with what to do next.

` + exitPolicy,
		Example: `  torchmem analyze trace.json.gz
  torchmem analyze traces/ snapshot.pickle --format markdown
  torchmem analyze trace.json.gz --format json | jq '.inputs[0].leaks.verdict'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAnalyze(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.rulesFile, "rules", "", "YAML file with rule thresholds, severities and disabled rules (as for check)")
	f.StringVar(&o.format, "format", formatText, "output format: text, json, markdown")
	f.IntVar(&o.top, "top", 8, "rows in the operator and allocation-site tables")
	f.StringVarP(&o.output, "output", "o", "", "also write the HTML report to this file")
	return cmd
}

// analysisJSON is one input's diagnosis in --format json.
type analysisJSON struct {
	Source    string               `json:"source"`
	Kind      string               `json:"kind"`
	Summary   *chrometrace.Summary `json:"summary,omitempty"`
	Operators []operatorJSON       `json:"operators,omitempty"`
	Sites     []stackJSON          `json:"sites,omitempty"`
	Leaks     *rules.LeakReport    `json:"leaks,omitempty"`
	Frag      *fragSummaryJSON     `json:"fragmentation,omitempty"`
	// MemorySummary: a memory_summary() log's allocator figures per device.
	MemorySummary []memsummary.Frag `json:"memory_summary,omitempty"`
	Findings      []rules.Finding   `json:"findings"`
}

func runAnalyze(stdout, stderr io.Writer, args []string, o *analyzeOptions) error {
	if err := checkFormat(o.format, formatText, formatJSON, formatMarkdown); err != nil {
		return err
	}
	if err := checkOutput(o.output, args); err != nil {
		return err
	}
	rs, _, err := loadRules(o.rulesFile)
	if err != nil {
		return err
	}
	ev, err := evaluate(stderr, args, "analyze", rs, o.rulesFile == "", &analyzeSites)
	if err != nil {
		return err
	}
	inputs := ev.Inputs
	var results []analysisJSON
	for _, in := range inputs {
		a := analysisJSON{Source: in.Source, Kind: in.Kind, Findings: ev.FindingsFor(in.Source)}
		if in.Trace != nil || in.Digest != nil && in.Digest.TraceSummary != nil {
			s := in.TraceSummary(-1)
			a.Summary = &s
			ops := slices.Clone(in.Operators())
			slices.SortFunc(ops, func(x, y chrometrace.OperatorStats) int {
				return cmp.Or(cmp.Compare(y.SelfDeviceMemory, x.SelfDeviceMemory), strings.Compare(x.Name, y.Name))
			})
			for _, r := range ops[:topN(o.top, len(ops))] {
				if r.SelfDeviceMemory <= 0 {
					break
				}
				a.Operators = append(a.Operators, operatorJSON{Name: r.Name, Calls: r.Calls, SelfDeviceMemoryBytes: r.SelfDeviceMemory,
					DeviceMemoryBytes: r.DeviceMemory, Allocs: r.Allocs, AllocBytes: r.AllocBytes, MeanAllocBytes: meanAlloc(r)})
			}
			sites := in.Sites(analyzeSites)
			slices.SortStableFunc(sites, func(x, y memtimeline.Site) int { return cmp.Compare(y.AllocBytes, x.AllocBytes) })
			for _, s := range sites[:topN(o.top, len(sites))] {
				a.Sites = append(a.Sites, stackJSON{Frames: nonNilStrings(s.Frames), Operator: s.Operator, ForwardOperator: s.ForwardOp,
					AllocBytes: s.AllocBytes, LiveBytesAtEnd: s.LiveBytesAtEnd, LiveBytesAtPeak: s.LiveBytesAtPeak, Allocs: s.Allocs, LiveBlocksAtEnd: s.LiveBlocksAtEnd})
			}
			l := in.Leaks()
			a.Leaks = &l
			f := in.Frag()
			a.Frag = &fragSummaryJSON{Verdict: f.Verdict, Reason: f.Reason, Advice: f.Advice}
		}
		if in.Summary != nil {
			a.MemorySummary = in.Summary.Frag()
		} else if in.Digest != nil {
			a.MemorySummary = in.Digest.MemorySummaryFrag
		}
		if in.Snapshot != nil || in.Digest != nil && in.Kind == rules.SourceSnapshot {
			l := in.SnapshotLeaks()
			a.Leaks = &l
		}
		results = append(results, a)
	}
	if o.output != "" {
		if err := writeReportFile(o.output, ev); err != nil {
			return err
		}
	}
	switch o.format {
	case formatJSON:
		if err := writeJSON(stdout, struct {
			Verdicts   []rules.Verdict        `json:"verdicts"`
			Checklists []rules.NamedChecklist `json:"checklists"`
			// CrossRank compares the ranks (null with fewer than two, as in leaks).
			CrossRank *rules.CrossRank `json:"cross_rank"`
			Inputs    []analysisJSON   `json:"inputs"`
		}{ev.Verdicts, ev.Checklists, ev.CrossRank, results}); err != nil {
			return err
		}
	case formatMarkdown:
		writeFindingsMarkdown(stdout, ev)
		writeCrossRank(stdout, ev.CrossRank, formatMarkdown)
	default:
		width := termWidth()
		writeVerdictText(stdout, ev.Verdicts, width)
		writeCrossRank(stdout, ev.CrossRank, formatText)
		writeChecklistText(stdout, ev)
		for i, a := range results {
			writeAnalysisText(stdout, a, inputs[i], o, width)
		}
		fmt.Fprintln(stdout, "== Findings ==")
		fmt.Fprintln(stdout, verdictLine(ev))
		writeFindingsText(stdout, ev.Findings)
	}
	return exitOf(ev)
}

// analyzeSites are the allocation sites analyze and report show.
var analyzeSites = memtimeline.SiteOptions{Device: -1, Depth: 5}

// fragSummaryJSON is the fragmentation verdict in analyze's output; the
// full report is torchmem frag's.
type fragSummaryJSON struct {
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason"`
	Advice  []string `json:"advice,omitempty"`
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func writeAnalysisText(w io.Writer, a analysisJSON, in *rules.Input, o *analyzeOptions, width int) {
	fmt.Fprintf(w, "== %s (%s) ==\n", a.Source, a.Kind)
	if a.Summary != nil {
		writeSummary(w, a.Source, in.Trace, *a.Summary)
		if len(a.Operators) > 0 {
			fmt.Fprintln(w, "Operators that keep the most GPU memory (Self CUDA Mem, as torch's key_averages):")
			tw := newTableWriter()
			tw.AppendHeader(table.Row{"Name", "Self CUDA Mem", "CUDA Mem", "# of Calls", "# Allocs"})
			for _, r := range a.Operators {
				tw.AppendRow(table.Row{shortOp(r.Name), memtimeline.FormatBytes(r.SelfDeviceMemoryBytes), memtimeline.FormatBytes(r.DeviceMemoryBytes), r.Calls, r.Allocs})
			}
			tw.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}})
			fmt.Fprintln(w, tw.Render())
		}
		if len(a.Sites) > 0 {
			fmt.Fprintln(w, "\nLines that allocate the most (innermost frame of your code):")
			tw := newTableWriter()
			tw.AppendHeader(table.Row{"Where", "Operator", "Allocated", "Live at end"})
			for _, s := range a.Sites {
				where := "(no Python stack)"
				if len(s.Frames) > 0 {
					where = s.Frames[len(s.Frames)-1]
				}
				op := s.Operator
				if i := strings.Index(op, " > "); i >= 0 {
					op = op[:i]
				}
				op = shortOp(op)
				if s.ForwardOperator != "" && !strings.HasPrefix(op, "autograd: ") {
					op += " (backward)"
				}
				tw.AppendRow(table.Row{where, op, memtimeline.FormatBytes(s.AllocBytes), memtimeline.FormatBytes(s.LiveBytesAtEnd)})
			}
			tw.SetColumnConfigs([]table.ColumnConfig{{Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}})
			fmt.Fprintln(w, tw.Render())
		}
	}
	if d := in.Digest; d != nil {
		switch in.Kind {
		case rules.SourceSMI:
			fmt.Fprintf(w, "nvidia-smi log: %d GPUs, %d rows\n", d.GPUs, d.Lines)
		case rules.SourceSteps:
			fmt.Fprintf(w, "Per-step memory log: %d lines\n", d.Lines)
		}
	}
	if in.SMI != nil {
		fmt.Fprintf(w, "nvidia-smi log: %d GPUs, %d rows\n", len(in.SMI.GPUs), in.SMI.Rows)
	}
	if a := in.SMIApps; a != nil {
		fmt.Fprintf(w, "nvidia-smi per-process log: %d processes, %d sampling rounds, %d rows\n", len(a.Processes), a.Rounds, a.Rows)
	}
	if in.Summary != nil || in.Digest != nil && in.Kind == rules.SourceSummary {
		if in.Summary != nil {
			fmt.Fprintf(w, "memory_summary() log: %d tables in %d lines\n", len(in.Summary.Samples), in.Summary.Lines)
		} else {
			fmt.Fprintf(w, "memory_summary() log: %d tables in %d lines\n", in.Digest.Tables, in.Digest.Lines)
		}
		for _, d := range a.MemorySummary {
			fmt.Fprintf(w, "  device %d: reserved %s, non-releasable %s (at most %.0f%% of reserved), %d cudaMalloc retries, %d OOMs\n",
				d.Device, memtimeline.FormatBytes(d.ReservedBytes), memtimeline.FormatBytes(d.NonReleasableBytes), 100*d.NonReleasableFraction, d.Retries, d.OOMs)
		}
	} else if in.StepLog != nil {
		fmt.Fprintf(w, "Per-step memory log: %d lines\n", in.StepLog.Lines)
	}
	if in.Snapshot != nil || in.Digest != nil && in.Digest.SnapshotStats != nil {
		var st snapshot.Stats
		if in.Digest != nil {
			st = *in.Digest.SnapshotStats
		} else {
			st = in.SnapshotReport().Stats
		}
		fmt.Fprintf(w, "Allocator snapshot: reserved %s, allocated %s, inactive split %s, largest free block %s, %d segments\n",
			memtimeline.FormatBytes(st.ReservedBytes), memtimeline.FormatBytes(st.AllocatedBytes), memtimeline.FormatBytes(st.InactiveSplitBytes),
			memtimeline.FormatBytes(st.LargestFreeBlock), st.Segments)
	}
	fmt.Fprintln(w)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
