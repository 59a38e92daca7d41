package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules"
)

// InputAnalysis is one input's section of analyze (and its --format json
// document's inputs[]).
type InputAnalysis struct {
	Source    string               `json:"source"`
	Kind      rules.SourceKind     `json:"kind"`
	Summary   *chrometrace.Summary `json:"summary,omitempty"`
	Operators []OperatorRow        `json:"operators,omitempty"`
	Sites     []SiteRow            `json:"sites,omitempty"`
	Leaks     *rules.LeakReport    `json:"leaks,omitempty"`
	Frag      *fragSummary         `json:"fragmentation,omitempty"`
	// MemorySummary: a memory_summary() log's allocator figures per device.
	MemorySummary []memsummary.Frag `json:"memory_summary,omitempty"`
	Findings      []rules.Finding   `json:"findings"`

	in       *rules.Input
	snapshot *snapshot.Stats
}

// fragSummary is the fragmentation verdict in analyze's output; the full
// report is torchmem frag's.
type fragSummary struct {
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason"`
	Advice  []string `json:"advice,omitempty"`
}

// analyses are analyze's sections, one per input, top rows in each table
// (the Evaluation's tables, in their order).
func analyses(ev *rules.Evaluation, top int) []InputAnalysis {
	var results []InputAnalysis
	for i := range ev.Tables {
		t := &ev.Tables[i]
		in := t.Input
		a := InputAnalysis{Source: in.Source, Kind: in.Kind, Findings: ev.FindingsFor(in.Source), in: in, snapshot: t.SnapshotStats}
		if in.Has(rules.SourceTrace) || in.Is(rules.SourceTrace) && in.Digest.Overview != nil {
			s := t.Summary
			a.Summary = &s
			for _, r := range t.Operators[:topN(top, len(t.Operators))] {
				if r.SelfDeviceMemory <= 0 {
					break
				}
				a.Operators = append(a.Operators, OperatorRow{Name: r.Name, Calls: r.Calls, SelfDeviceMemoryBytes: r.SelfDeviceMemory,
					DeviceMemoryBytes: r.DeviceMemory, Allocs: r.Allocs, AllocBytes: r.AllocBytes, MeanAllocBytes: meanAlloc(r)})
			}
			for _, s := range t.Sites[:topN(top, len(t.Sites))] {
				a.Sites = append(a.Sites, SiteRow{Frames: s.Frames, Operator: s.Operator, ForwardOperator: s.ForwardOp,
					AllocBytes: s.AllocBytes, LiveBytesAtEnd: s.LiveBytesAtEnd, LiveBytesAtPeak: s.LiveBytesAtPeak, Allocs: s.Allocs, LiveBlocksAtEnd: s.LiveBlocksAtEnd})
			}
			a.Leaks = t.Leak
			if f := t.Frag; f != nil {
				a.Frag = &fragSummary{Verdict: f.Verdict, Reason: f.Reason, Advice: f.Advice}
			}
		}
		a.MemorySummary = t.MemorySummary
		if in.Is(rules.SourceSnapshot) {
			a.Leaks = t.Leak
		}
		results = append(results, a)
	}
	return results
}

// analyzeJSON is analyze's --format json document.
type analyzeJSON struct {
	Verdicts   []rules.Verdict        `json:"verdicts"`
	Checklists []rules.NamedChecklist `json:"checklists"`
	// CrossRank compares the ranks (null with fewer than two, as in leaks).
	CrossRank *rules.CrossRank `json:"cross_rank"`
	Inputs    []InputAnalysis  `json:"inputs"`
}

// writeAnalyze is the one-screen diagnosis: the answer (verdicts, the
// cross-rank view, the checklist) before each input's tables and the
// findings.
func (r *Report) writeAnalyze(w io.Writer) error {
	ev := r.Eval
	switch r.Format {
	case JSON:
		return WriteJSON(w, analyzeJSON{ev.Verdicts, ev.Checklists, ev.CrossRank, r.Inputs})
	case Markdown:
		writeFindingsMarkdown(w, ev)
	default:
		// The run's answer (which rank differs, by how much) before each
		// rank's.
		writeCrossRank(w, ev.CrossRank, Text)
		writeVerdictText(w, ev.Verdicts, r.Width)
		writeChecklistText(w, ev)
		for _, a := range r.Inputs {
			writeAnalysisText(w, a)
		}
		fmt.Fprintln(w, "== Findings ==")
		fmt.Fprintln(w, VerdictLine(ev))
		writeFindingsText(w, ev.Findings)
	}
	return nil
}
func writeAnalysisText(w io.Writer, a InputAnalysis) {
	in := a.in
	fmt.Fprintf(w, "== %s (%s) ==\n", a.Source, a.Kind)
	if a.Summary != nil {
		writeTraceSummary(w, a.Source, in.Trace, *a.Summary)
		if len(a.Operators) > 0 {
			fmt.Fprintln(w, "Operators that keep the most GPU memory (Self CUDA Mem, as torch's key_averages):")
			tw := NewTable()
			tw.AppendHeader(table.Row{"Name", "Self CUDA Mem", "CUDA Mem", "# of Calls", "# Allocs"})
			for _, r := range a.Operators {
				tw.AppendRow(table.Row{shortOp(r.Name), memtimeline.FormatBytes(r.SelfDeviceMemoryBytes), memtimeline.FormatBytes(r.DeviceMemoryBytes), r.Calls, r.Allocs})
			}
			tw.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}})
			fmt.Fprintln(w, tw.Render())
		}
		if len(a.Sites) > 0 {
			fmt.Fprintln(w, "\nLines that allocate the most (innermost frame of your code):")
			tw := NewTable()
			tw.AppendHeader(table.Row{"Where", "Operator", "Allocated", "Live at end"})
			for _, s := range a.Sites {
				where := chrometrace.InnermostFrame(s.Frames)
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
	if in.Has(rules.SourceSMI) {
		fmt.Fprintf(w, "nvidia-smi log: %d GPUs, %d rows\n", len(in.SMI.GPUs), in.SMI.Rows)
	}
	if in.Has(rules.SourceSMIApps) {
		a := in.SMIApps
		fmt.Fprintf(w, "nvidia-smi per-process log: %s, %s, %s\n", count(len(a.Processes), "process", "processes"), count(a.Rounds, "sampling round", "sampling rounds"), count(a.Rows, "row", "rows"))
	}
	if in.Is(rules.SourceMemSummary) {
		if in.Has(rules.SourceMemSummary) {
			fmt.Fprintf(w, "memory_summary() log: %d tables in %d lines\n", len(in.MemSummary.Samples), in.MemSummary.Lines)
		} else {
			fmt.Fprintf(w, "memory_summary() log: %d tables in %d lines\n", in.Digest.Tables, in.Digest.Lines)
		}
		for _, d := range a.MemorySummary {
			fmt.Fprintf(w, "  device %d: reserved %s, non-releasable %s (at most %.0f%% of reserved), %d cudaMalloc retries, %d OOMs\n",
				d.Device, memtimeline.FormatBytes(d.ReservedBytes), memtimeline.FormatBytes(d.NonReleasableBytes), 100*d.NonReleasableFraction, d.Retries, d.OOMs)
		}
	} else if in.Has(rules.SourceSteps) {
		fmt.Fprintf(w, "Per-step memory log: %d lines\n", in.StepLog.Lines)
	}
	if st := a.snapshot; st != nil {
		fmt.Fprintf(w, "Allocator snapshot: reserved %s, allocated %s, inactive split %s, largest free block %s, %d segments\n",
			memtimeline.FormatBytes(st.ReservedBytes), memtimeline.FormatBytes(st.AllocatedBytes), memtimeline.FormatBytes(st.InactiveSplitBytes),
			memtimeline.FormatBytes(st.LargestFreeBlock), st.Segments)
	}
	fmt.Fprintln(w)
}
