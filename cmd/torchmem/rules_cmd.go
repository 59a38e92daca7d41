package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newRulesCmd) }

func newRulesCmd() *cobra.Command {
	var format, rulesFile string
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "List every rule with its default threshold and severity",
		Long: `Lists the rules 'torchmem check' and 'torchmem analyze' apply, with their
ids (for the YAML config), severities and thresholds. With --rules, shows
the values after that file's overrides.`,
		Example: `  torchmem rules
  torchmem rules --rules torchmem.yaml --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, formatTable, formatJSON, formatMarkdown); err != nil {
				return err
			}
			rs, _, err := loadRules(rulesFile)
			if err != nil {
				return err
			}
			return writeRules(cmd.OutOrStdout(), rs.Rules, format)
		},
	}
	cmd.Flags().StringVar(&format, "format", formatTable, "output format: table, json, markdown")
	cmd.Flags().StringVar(&rulesFile, "rules", "", "YAML config whose overrides to show")
	return cmd
}

type ruleJSON struct {
	ID          string  `json:"id"`
	Severity    string  `json:"severity"`
	Threshold   float64 `json:"threshold"`
	Unit        string  `json:"unit"`
	Description string  `json:"description"`
}

func writeRules(w io.Writer, rs []rules.Rule, format string) error {
	if format == formatJSON {
		out := []ruleJSON{}
		for _, r := range rs {
			out = append(out, ruleJSON{r.ID, r.Severity.String(), r.Threshold, r.Unit, r.Description})
		}
		return writeJSON(w, struct {
			Rules []ruleJSON `json:"rules"`
		}{out})
	}
	tw := newTableWriter()
	tw.AppendHeader(table.Row{"Rule", "Severity", "Threshold", "Description"})
	for _, r := range rs {
		tw.AppendRow(table.Row{r.ID, r.Severity.String(), formatThreshold(r.Threshold, r.Unit), r.Description})
	}
	renderTable(w, tw, format)
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
