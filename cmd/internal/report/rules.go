package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/rules"
)

// NewRules builds the rules view: the rules in force (the built-in ones
// with a config file's overrides).
func NewRules(rs rules.RuleSet, o Options) *Report {
	o.View = ViewRules
	return &Report{Options: o, RuleSet: rs}
}

type ruleJSON struct {
	ID        string  `json:"id"`
	Severity  string  `json:"severity"`
	Threshold float64 `json:"threshold"`
	Unit      string  `json:"unit"`
	// Reads are the kinds of input the rule looks at.
	Reads       []rules.SourceKind `json:"reads"`
	Description string             `json:"description"`
}

// writeRules lists the rules in force with their ids, severities and
// thresholds.
func writeRules(w io.Writer, rs []rules.Rule, format string) error {
	if format == JSON {
		out := []ruleJSON{}
		for _, r := range rs {
			reads := r.Reads
			if reads == nil {
				reads = []rules.SourceKind{}
			}
			out = append(out, ruleJSON{r.ID, r.Severity.String(), r.Threshold, r.Unit, reads, r.Description})
		}
		return WriteJSON(w, struct {
			Rules []ruleJSON `json:"rules"`
		}{out})
	}
	tw := NewTable()
	tw.AppendHeader(table.Row{"Rule", "Severity", "Threshold", "Description"})
	for _, r := range rs {
		// What the rule reads ends its description: a fifth column
		// would narrow the others until rule ids wrap.
		reads := make([]string, len(r.Reads))
		for i, k := range r.Reads {
			reads[i] = string(k)
		}
		tw.AppendRow(table.Row{r.ID, r.Severity.String(), formatThreshold(r.Threshold, r.Unit), r.Description + " (reads: " + strings.Join(reads, ", ") + ")"})
	}
	Table(w, tw, format)
	return nil
}

func formatThreshold(v float64, unit string) string {
	switch unit {
	case "bytes", "bytes_per_step":
		s := fmt.Sprintf("%s (%s)", strconv.FormatFloat(v, 'f', -1, 64), unit)
		return s
	case "fraction":
		return fmt.Sprintf("%g (%.0f%%)", v, 100*v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}
