package report

import (
	"fmt"
	"io"
	"strconv"

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
	ID          string  `json:"id"`
	Severity    string  `json:"severity"`
	Threshold   float64 `json:"threshold"`
	Unit        string  `json:"unit"`
	Description string  `json:"description"`
}

// writeRules lists the rules in force with their ids, severities and
// thresholds.
func writeRules(w io.Writer, rs []rules.Rule, format string) error {
	if format == JSON {
		out := []ruleJSON{}
		for _, r := range rs {
			out = append(out, ruleJSON{r.ID, r.Severity.String(), r.Threshold, r.Unit, r.Description})
		}
		return WriteJSON(w, struct {
			Rules []ruleJSON `json:"rules"`
		}{out})
	}
	tw := NewTable()
	tw.AppendHeader(table.Row{"Rule", "Severity", "Threshold", "Description"})
	for _, r := range rs {
		tw.AppendRow(table.Row{r.ID, r.Severity.String(), formatThreshold(r.Threshold, r.Unit), r.Description})
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
