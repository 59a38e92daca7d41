package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// LeakFile is one file's leak report in the leaks view.
type LeakFile struct {
	Path   string
	Rank   int64
	Report rules.LeakReport
}

// leakFiles are the leak reports of the traces and snapshots (the
// Evaluation's, made with the command's options); logs carry their
// evidence in the verdict.
func leakFiles(ev *rules.Evaluation, top int) []LeakFile {
	var results []LeakFile
	for _, t := range ev.Tables {
		in := t.Input
		if t.Leak == nil || !(in.IsDigest() && in.Digest.Leaks != nil || in.Has(rules.SourceSnapshot) || in.Has(rules.SourceTrace)) {
			continue
		}
		r := LeakFile{Path: in.Source, Rank: in.Rank, Report: *t.Leak}
		if top > 0 && len(r.Report.Suspects) > top {
			r.Report.Suspects = r.Report.Suspects[:top]
		}
		results = append(results, r)
	}
	return results
}

// RankLeakJSON is one file's leak report in --format json.
type RankLeakJSON struct {
	Rank  int64  `json:"rank"`
	Trace string `json:"trace"`
	rules.LeakReport
	// Outlier is true for a file of a rank the cross-rank view names.
	Outlier bool `json:"outlier"`
}

// leaksJSON is leaks' --format json document.
type leaksJSON struct {
	Verdicts []rules.Verdict `json:"verdicts"`
	// CrossRank compares the ranks (null with fewer than two).
	CrossRank *rules.CrossRank `json:"cross_rank"`
	Ranks     []RankLeakJSON   `json:"ranks"`
}

// writeLeaks is the leaks view: one verdict per run and rank (from all of
// its files), the cross-rank view, then each file's steps and suspects.
func (r *Report) writeLeaks(w io.Writer) error {
	ev := r.Eval
	if r.Format == JSON {
		outlier := outlierFiles(ev)
		out := leaksJSON{Verdicts: ev.Verdicts, CrossRank: ev.CrossRank, Ranks: []RankLeakJSON{}}
		for _, f := range r.LeakFiles {
			out.Ranks = append(out.Ranks, RankLeakJSON{Rank: f.Rank, Trace: f.Path, LeakReport: f.Report, Outlier: outlier[f.Path]})
		}
		return WriteJSON(w, out)
	}
	// The run's answer (which rank differs, by how much) first, then
	// each rank's.
	writeCrossRank(w, ev.CrossRank, r.Format)
	if r.Format == Markdown {
		writeVerdictMarkdown(w, ev.Verdicts)
	} else {
		writeVerdictText(w, ev.Verdicts, r.Width)
	}
	for _, f := range r.LeakFiles {
		writeLeakReport(w, f, r.Format)
	}
	return nil
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

// writeLeakReport prints one file's steps, leaks and suspects.
func writeLeakReport(w io.Writer, r LeakFile, format string) {
	rep := r.Report
	title := r.Path
	if r.Rank >= 0 {
		title = fmt.Sprintf("%s (rank %d)", r.Path, r.Rank)
	}
	reason := rep.Reason
	if format == Markdown {
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
		tw := NewTable()
		tw.AppendHeader(table.Row{"Step", "Allocated in step", "Still alive at end", "Blocks", ""})
		for _, s := range rep.Steps {
			note := ""
			if s.Steady && !rep.WholeWindow {
				note = "steady state"
			}
			tw.AppendRow(table.Row{s.Name, memtimeline.FormatBytes(s.AllocBytes), memtimeline.FormatBytes(s.SurvivorBytes), s.SurvivorBlocks, note})
		}
		tw.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}})
		Table(w, tw, format)
	}
	for i, l := range rep.Leaks {
		accel := ""
		if l.Accelerating {
			accel = fmt.Sprintf(", accelerating (+%s per step each step)", memtimeline.FormatBytes(l.AccelerationBytes))
		}
		esc, nl := func(s string) string { return s }, "\n"
		if format == Markdown {
			esc, nl = mdEscape, "  \n"
		}
		fmt.Fprintf(w, "\nLeak %d: %s, %s per step, steps #%d..#%d%s, %s%s  why: %s%s  fix: %s%s",
			i+1, l.Kind, memtimeline.FormatBytes(l.BytesPerStep), l.FirstStep, l.LastStep, accel, count(len(l.Sites), "site", "sites"), nl, esc(l.Evidence), nl, esc(l.Fix), nl)
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
		tw := NewTable()
		tw.AppendHeader(table.Row{"Per step", "Blocks", "Steps", "Kind", "Call chain (outermost first)", "Operator"})
		for _, s := range rep.Suspects {
			stack := slices.Clone(s.Stack)
			if len(stack) == 0 {
				stack = []string{chrometrace.NoPythonStack}
			}
			sep := "\n"
			if format != Text {
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
		Table(w, tw, format)
	}
	fmt.Fprintln(w)
}
