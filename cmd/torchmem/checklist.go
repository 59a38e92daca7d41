package main

// The checklist section: after the verdict block, every item of the
// field's checklist with pass / fail / not measurable (rules.Checklist).

import (
	"fmt"
	"io"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/rules"
)

// checklists computes the checklist of every verdict (run and rank).
func checklists(vs []rules.Verdict, fs []rules.Finding) [][]rules.CheckItem {
	out := make([][]rules.CheckItem, len(vs))
	for i, v := range vs {
		out[i] = rules.Checklist(v, fs)
	}
	return out
}

// checklistJSON is one run and rank's checklist in --format json.
type checklistJSON struct {
	Name  string            `json:"name"`
	Items []rules.CheckItem `json:"items"`
}

func checklistsJSON(vs []rules.Verdict, fs []rules.Finding) []checklistJSON {
	out := []checklistJSON{}
	for i, items := range checklists(vs, fs) {
		out = append(out, checklistJSON{Name: vs[i].Name, Items: items})
	}
	return out
}

func checkMark(status string) string {
	switch status {
	case rules.CheckPass:
		return "pass"
	case rules.CheckFail:
		return "FAIL"
	}
	return "n/a"
}

// writeChecklistText prints the checklist of each run and rank.
func writeChecklistText(w io.Writer, vs []rules.Verdict, fs []rules.Finding) {
	for i, items := range checklists(vs, fs) {
		title := "== Checklist =="
		if len(vs) > 1 {
			title = fmt.Sprintf("== Checklist: %s ==", vs[i].Name)
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
func writeChecklistMarkdown(w io.Writer, vs []rules.Verdict, fs []rules.Finding) {
	icons := map[string]string{rules.CheckPass: "✅ pass", rules.CheckFail: "❌ fail", rules.CheckNotMeasurable: "➖ not measurable"}
	for i, items := range checklists(vs, fs) {
		title := "**Checklist**"
		if len(vs) > 1 {
			title = "**Checklist: " + mdEscape(vs[i].Name) + "**"
		}
		fmt.Fprintf(w, "%s\n\n", title)
		tw := newTableWriter()
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
