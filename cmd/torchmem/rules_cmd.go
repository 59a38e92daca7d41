package main

import (
	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/cmd/internal/report"
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
			return report.Generate(cmd.OutOrStdout(), report.NewRules(rs, report.Options{Format: format}))
		},
	}
	cmd.Flags().StringVar(&format, "format", formatTable, "output format: table, json, markdown")
	cmd.Flags().StringVar(&rulesFile, "rules", "", "YAML config whose overrides to show")
	return cmd
}
