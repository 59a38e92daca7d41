package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// The cross-rank view (rules.CompareRanks) as leaks, analyze and the
// report show it: one row per rank, the ranks that differ named first.

// crossRankMaxRows bounds the text table; the outliers are always shown.
const crossRankMaxRows = 16

func stepTime(ns int64) string {
	if ns <= 0 {
		return "-"
	}
	return formatNS(ns)
}

// peakCell is a rank's peak, "not recorded" when none of its inputs
// records it.
func peakCell(b int64) string {
	if b < 0 {
		return "not recorded"
	}
	return memtimeline.FormatBytes(b)
}

// crossRankRows are the rows a table shows: every outlier, then the
// others up to crossRankMaxRows; hidden counts those left out.
func crossRankRows(cr *rules.CrossRank) (rows []rules.RankRow, hidden int) {
	for _, r := range cr.Rows {
		if r.Outlier {
			rows = append(rows, r)
		}
	}
	for _, r := range cr.Rows {
		if !r.Outlier {
			if len(rows) >= crossRankMaxRows {
				hidden++
				continue
			}
			rows = append(rows, r)
		}
	}
	return rows, hidden
}

// writeCrossRank prints the view in text or Markdown.
func writeCrossRank(w io.Writer, cr *rules.CrossRank, format string) {
	if cr == nil {
		return
	}
	if format == Markdown {
		fmt.Fprintf(w, "**Across ranks:** %s\n\n", mdEscape(cr.Headline))
	} else {
		fmt.Fprintf(w, "ACROSS RANKS  %s\n", cr.Headline)
	}
	rows, hidden := crossRankRows(cr)
	tw := NewTable()
	tw.AppendHeader(table.Row{"Rank", "Leak", "Per step", "Peak allocated", "Step time", "Differs from the others"})
	for _, r := range rows {
		tw.AppendRow(table.Row{r.Rank, r.Leak, memtimeline.FormatBytes(r.BytesPerStep), peakCell(r.PeakAllocatedBytes), stepTime(r.StepTimeNs), strings.Join(r.Differs, "; ")})
	}
	if hidden > 0 {
		tw.AppendRow(table.Row{"…", fmt.Sprintf("%d more ranks like the others", hidden), "", "", "", ""})
	}
	tw.SetColumnConfigs([]table.ColumnConfig{{Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}, {Number: 5, Align: text.AlignRight}})
	Table(w, tw, format)
	fmt.Fprintln(w)
}
