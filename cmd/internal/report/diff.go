package report

import (
	"fmt"
	"io"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// diffJSON is one pair's --format json document.
type diffJSON struct {
	Base string `json:"base"`
	Head string `json:"head"`
	// Passed is false when the leak gate or a budget fails (exit 1).
	Passed bool `json:"passed"`
	// NewLeak says why the leak gate failed: HEAD leaks where BASE did
	// not, or a new suspect at or above the leak threshold.
	NewLeak       []string                `json:"new_leak"`
	Changed       bool                    `json:"changed"`
	WithinBudget  bool                    `json:"within_budget"`
	Violations    []string                `json:"violations"`
	Metrics       []rules.DiffMetricDelta `json:"metrics"`
	BaseVerdict   string                  `json:"base_leak_verdict"`
	HeadVerdict   string                  `json:"head_leak_verdict"`
	Operators     []rules.DiffMover       `json:"operators"`
	SitesAlloc    []rules.DiffMover       `json:"sites_alloc"`
	SitesLive     []rules.DiffMover       `json:"sites_live_at_end"`
	NewSuspects   []rules.LeakSuspect     `json:"new_suspects"`
	StepSurvivors [][2]int64              `json:"step_survivors"`
	// StepPeakAllocated is [base, head] peak allocated per step.
	StepPeakAllocated *[2][]int64 `json:"step_peak_allocated,omitempty"`
}

// writeDiff writes each pair's comparison (HTML: the first pair's page).
func (r *Report) writeDiff(w io.Writer) error {
	if r.Format == HTML {
		p := r.Diffs[0]
		return writeDiffPage(w, p.Answer.Diff, p.Answer.Headline, !p.Answer.Passed(), p.Chart, r.Version)
	}
	return EachInput(w, r.Format, r.Diffs, func(w io.Writer, p rules.DiffPair) error {
		a := p.Answer
		d := a.Diff
		if r.Format == JSON {
			return WriteJSON(w, diffJSON{Base: d.Base, Head: d.Head, Passed: a.Passed(), NewLeak: a.NewLeak,
				Changed: d.Changed, WithinBudget: len(a.Violations) == 0, Violations: a.Violations,
				Metrics: d.Metrics, BaseVerdict: d.BaseVerdict, HeadVerdict: d.HeadVerdict, Operators: d.Operators,
				SitesAlloc: d.SitesAlloc, SitesLive: d.SitesLive, NewSuspects: d.NewSuspects, StepSurvivors: d.StepSurvivors, StepPeakAllocated: d.StepPeakAllocated})
		}
		writeDiffText(w, a, r.Format)
		return nil
	})
}

func writeDiffText(w io.Writer, a *rules.DiffAnswer, format string) {
	d, line := a.Diff, a.Headline
	if format == Markdown {
		icon := "✅"
		if !a.Passed() {
			icon = "❌"
		}
		fmt.Fprintf(w, "%s **torchmem diff: %s**\n\n", icon, mdEscape(line))
	} else {
		fmt.Fprintf(w, "torchmem diff %s -> %s: %s\n\n", d.Base, d.Head, line)
	}
	tw := NewTable()
	tw.AppendHeader(table.Row{"Metric", "Base", "Head", "Change", "%"})
	for _, m := range d.Metrics {
		pct := fmt.Sprintf("%+.1f%%", m.Pct)
		if m.Base == 0 && m.Delta != 0 {
			pct = "new"
		}
		tw.AppendRow(table.Row{m.Metric, memtimeline.FormatBytes(m.Base), memtimeline.FormatBytes(m.Head), signed(m.Delta), pct})
	}
	tw.AppendRow(table.Row{"leak verdict", d.BaseVerdict, d.HeadVerdict, "", ""})
	tw.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}, {Number: 5, Align: text.AlignRight}})
	Table(w, tw, format)
	if format == Markdown {
		writeStepChartMermaid(w, d)
	}
	movers := func(title string, ms []rules.DiffMover) {
		if len(ms) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s\n", title)
		if format == Markdown {
			fmt.Fprintln(w)
		}
		perStep := false
		for _, m := range ms {
			perStep = perStep || m.DeltaPerStep != 0
		}
		tw := NewTable()
		header := table.Row{"Name", "Base", "Head", "Change"}
		if perStep {
			header = append(header, "Change per step")
		}
		tw.AppendHeader(header)
		for _, m := range ms {
			// Whole: the table wraps a long name at its joints.
			row := table.Row{m.Name, memtimeline.FormatBytes(m.Base), memtimeline.FormatBytes(m.Head), signed(m.Delta)}
			if perStep {
				row = append(row, signed(m.DeltaPerStep))
			}
			tw.AppendRow(row)
		}
		tw.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}, {Number: 5, Align: text.AlignRight}})
		Table(w, tw, format)
	}
	movers("Operators whose Self CUDA Mem moved most:", d.Operators)
	movers("Allocation sites whose allocated bytes moved most:", d.SitesAlloc)
	movers("Allocation sites whose bytes alive at the end moved most:", d.SitesLive)
	if len(d.NewSuspects) > 0 {
		fmt.Fprintln(w, "\nLeak suspects new in HEAD:")
		for _, s := range d.NewSuspects {
			label := rules.SiteLabel(s.Stack, s.Operator)
			if format == Markdown {
				label = mdEscape(label)
			}
			fmt.Fprintf(w, "  %s per step: %s\n", memtimeline.FormatBytes(s.BytesPerStep), label)
		}
	}
}
