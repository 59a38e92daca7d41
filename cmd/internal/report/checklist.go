package report

// The checklist section: after the verdict block, every item of the
// field's checklist with pass / fail / not measurable (rules.Checklist).

import (
	"fmt"
	"io"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/rules"
)

func checkMark(status string) string {
	switch status {
	case rules.CheckPass:
		return "pass"
	case rules.CheckFail:
		return "FAIL"
	case rules.CheckWarn:
		return "warn"
	case rules.CheckNotChecked:
		return "off"
	}
	return "n/a"
}

// writeChecklistText prints the checklist of each run and rank.
func writeChecklistText(w io.Writer, ev *rules.Evaluation) {
	for _, cl := range ev.Checklists {
		items := cl.Items
		title := "== Checklist =="
		if len(ev.Checklists) > 1 {
			title = fmt.Sprintf("== Checklist: %s ==", cl.Name)
		}
		fmt.Fprintln(w, title)
		for _, it := range items {
			fmt.Fprintf(w, "  [%-4s] %s: %s\n", checkMark(it.Status), it.Item, it.Detail)
			if it.Record != "" {
				fmt.Fprintf(w, "         to measure it, record %s\n", it.Record)
			}
		}
		fmt.Fprintln(w)
	}
}

// writeChecklistMarkdown writes the checklist as a table per run and rank.
func writeChecklistMarkdown(w io.Writer, ev *rules.Evaluation) {
	icons := map[string]string{rules.CheckPass: "✅ pass", rules.CheckFail: "❌ fail", rules.CheckWarn: "⚠️ warn", rules.CheckNotMeasurable: "➖ not measurable", rules.CheckNotChecked: "⏸ not checked"}
	for _, cl := range ev.Checklists {
		items := cl.Items
		title := "**Checklist**"
		if len(ev.Checklists) > 1 {
			title = "**Checklist: " + mdEscape(cl.Name) + "**"
		}
		fmt.Fprintf(w, "%s\n\n", title)
		tw := NewTable()
		tw.AppendHeader(table.Row{"Item", "Result", "Found", "To measure it, record"})
		for _, it := range items {
			tw.AppendRow(table.Row{it.Item, icons[it.Status], it.Detail, it.Record})
		}
		fmt.Fprintln(w, tw.RenderMarkdown())
		fmt.Fprintln(w)
	}
}

// checklistStatusClass is the report's CSS class for a status.
func checklistStatusClass(status string) string {
	return strings.ReplaceAll(status, " ", "-")
}
