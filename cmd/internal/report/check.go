package report

import (
	"fmt"
	"io"

	"github.com/torchmem/torchmem/rules"
)

// checkJSON is check's --format json document.
type checkJSON struct {
	Passed     bool                   `json:"passed"`
	Errors     int                    `json:"errors"`
	Warnings   int                    `json:"warnings"`
	Notes      int                    `json:"notes"`
	Verdicts   []rules.Verdict        `json:"verdicts"`
	Checklists []rules.NamedChecklist `json:"checklists"`
	Findings   []rules.Finding        `json:"findings"`
}

// writeCheck is the gate's view: the verdict line, each run's verdict,
// the checklist and every finding (SARIF: the findings for code scanning).
func (r *Report) writeCheck(w io.Writer) error {
	ev := r.Eval
	switch r.Format {
	case JSON:
		return WriteJSON(w, checkJSON{ev.Passed(), ev.Errors, ev.Warnings, ev.Notes, ev.Verdicts, ev.Checklists, ev.Findings})
	case Markdown:
		writeFindingsMarkdown(w, ev)
	case SARIF:
		root := r.SourceRoot
		if root == "" {
			root = DefaultSourceRoot()
		}
		return writeSARIF(w, ev.Findings, ev.RuleSet.Rules, root, r.Version)
	default:
		fmt.Fprintln(w, VerdictLine(ev))
		fmt.Fprintln(w)
		writeCrossRank(w, ev.CrossRank, Text)
		writeVerdictText(w, ev.Verdicts, r.Width)
		writeChecklistText(w, ev)
		writeFindingsText(w, ev.Findings)
	}
	return nil
}
