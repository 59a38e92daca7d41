package report

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/cmd/internal/escape"
	"github.com/torchmem/torchmem/rules"
)

// VerdictLine is the one line a PR comment or CI log starts with.
func VerdictLine(ev *rules.Evaluation) string {
	status := "PASS"
	if !ev.Passed() {
		status = "FAIL"
	}
	return fmt.Sprintf("torchmem: %s: %s, %s, %s in %s", status, count(ev.Errors, "error", "errors"), count(ev.Warnings, "warning", "warnings"), count(ev.Notes, "note", "notes"), count(len(ev.Inputs), "input", "inputs"))
}

// count is n with its noun, singular for one: "1 error", "2 errors".
func count[N int | int64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// leakSites is the list of a leak finding's sites in its detail.
var leakSites = regexp.MustCompile(`\d+ sites: .*$`)

// writeFindingsText prints the findings under the verdict blocks: a leak
// finding names its rule and figure, and leaves why, the chain and the
// fix to the LEAK entry above (said once).
func writeFindingsText(w io.Writer, fs []rules.Finding) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "No findings.")
		return
	}
	for _, f := range fs {
		if rules.IsLeakRule(f.Rule) {
			d := "why, the holding chain and the fix: the LEAK entry above"
			if m := leakSites.FindString(f.Detail); m != "" {
				d = m + " " + d
			}
			f.Detail, f.Advice = d, ""
		}
		fmt.Fprintf(w, "[%s] %s: %s\n", strings.ToUpper(f.Severity.String()), f.Rule, f.Title)
		if f.Location != nil {
			fmt.Fprintf(w, "    at %s", f.Location)
			if f.Location.Function != "" {
				fmt.Fprintf(w, " (%s)", f.Location.Function)
			}
			fmt.Fprintln(w)
		}
		if f.Detail != "" {
			fmt.Fprintf(w, "    %s\n", f.Detail)
		}
		if f.Advice != "" {
			fmt.Fprintf(w, "    what to do: %s\n", f.Advice)
		}
		if f.Source != "" {
			fmt.Fprintf(w, "    in %s\n", f.Source)
		}
	}
}

// writeFindingsMarkdown fits $GITHUB_STEP_SUMMARY and PR comments: a
// verdict line, then a table.
func writeFindingsMarkdown(w io.Writer, ev *rules.Evaluation) {
	fs := ev.Findings
	icon := "✅"
	if !ev.Passed() {
		icon = "❌"
	}
	fmt.Fprintf(w, "%s **%s**\n\n", icon, VerdictLine(ev))
	writeCrossRank(w, ev.CrossRank, Markdown) // the run's answer (which rank) first
	writeVerdictMarkdown(w, ev.Verdicts)      // each rank's, before the table
	writeChecklistMarkdown(w, ev)
	if len(fs) == 0 {
		return
	}
	tw := NewTable()
	tw.AppendHeader(table.Row{"Severity", "Rule", "Finding", "Where", "What to do"})
	for _, f := range fs {
		var where string
		switch {
		case f.Location != nil:
			where = escape.MarkdownCode(f.Location.String())
			if f.Operator != "" {
				where += " via " + escape.MarkdownCode(f.Operator)
			}
		case f.Operator != "":
			where = escape.MarkdownCode(f.Operator)
		}
		tw.AppendRow(table.Row{f.Severity.String(), escape.MarkdownText(escape.MarkdownCode(f.Rule)), f.Title, escape.MarkdownText(where), f.Advice})
	}
	fmt.Fprintln(w, tw.RenderMarkdown())
}

// mdEscape escapes text from the inputs for Markdown outside tables
// (table cells are escaped by the table itself: see NewTable).
func mdEscape(s string) string { return escape.Markdown(s) }

// mdCode shows a name from the inputs as a Markdown code span that no
// character of the name can close.
func mdCode(s string) string { return escape.MarkdownCode(s) }
