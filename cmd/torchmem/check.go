package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newCheckCmd) }

type checkOptions struct {
	limits     chrometrace.Limits // the readers' caps (the --max-* flags)
	rulesFile  string
	format     string
	sourceRoot string
}

func newCheckCmd() *cobra.Command {
	o := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check INPUT...",
		Short: "Gate CI on memory rules: exit 1 when a rule at error severity fires",
		Long: `Runs every rule (see 'torchmem rules') on the inputs: Kineto traces,
directories of per-rank traces, nvidia-smi CSV logs and per-step memory logs,
each recognized by its content.

A YAML file (--rules) sets thresholds and severities and disables rules:

  rules:
    memory.leak:
      threshold: 2097152   # bytes per step
      severity: error
    memory.top-ops-share:
      disabled: true

--format markdown fits $GITHUB_STEP_SUMMARY and PR comments; --format
sarif feeds GitHub code scanning, which then annotates the leaking line: file
URIs are relative to --source-root (default: the git work tree of the current
directory), and a file outside it is named in the message only.

` + exitPolicy,
		Example: `  torchmem check trace.json.gz
  torchmem check traces/ --rules torchmem.yaml --format markdown >> "$GITHUB_STEP_SUMMARY"
  torchmem check trace.json.gz --format sarif > torchmem.sarif`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limits = limitsOf(cmd)
			return runCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	cmd.Flags().StringVar(&o.rulesFile, "rules", "", "YAML file with rule thresholds, severities and disabled rules")
	cmd.Flags().StringVar(&o.format, "format", formatText, "output format: text, json, markdown, sarif")
	cmd.Flags().StringVar(&o.sourceRoot, "source-root", "", "SARIF: make file URIs relative to DIR (default: the git work tree of the current directory, else the current directory)")
	return cmd
}

// loadRules returns the rules in force: the built-in rules with a config
// file's overrides, and the ids it disabled.
func loadRules(path string) (rules.RuleSet, *rules.Config, error) {
	if path == "" {
		return rules.DefaultRuleSet(), nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return rules.RuleSet{}, nil, badInput(load.FileError(path, err))
	}
	defer f.Close()
	cfg, err := rules.ParseConfig(f)
	if err != nil {
		return rules.RuleSet{}, nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	rs, err := rules.NewRuleSet(cfg)
	if err != nil {
		return rules.RuleSet{}, nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	return rs, cfg, nil
}

// judged is the question of the commands that judge every kind of input
// with the rules in force (analyze, check, report): with the built-in
// thresholds, many inputs are read into summaries to bound memory; sites:
// also compute the tables' analyses beside the rules.
func judged(command string, rs rules.RuleSet, rulesFile string, sites *memtimeline.SiteOptions) question {
	return question{command: command, fallback: load.Unknown, bounded: rulesFile == "",
		options: rules.Options{Rules: rs, Sites: sites}}
}

func runCheck(stdout, stderr io.Writer, args []string, o *checkOptions) error {
	if err := checkFormat(o.format, formatText, formatJSON, formatMarkdown, formatSARIF); err != nil {
		return err
	}
	if o.sourceRoot != "" {
		if st, err := os.Stat(o.sourceRoot); err != nil || !st.IsDir() {
			return badInput(fmt.Errorf("--source-root %s: not a directory", o.sourceRoot))
		}
	}
	rs, _, err := loadRules(o.rulesFile)
	if err != nil {
		return err
	}
	q := judged("check", rs, o.rulesFile, nil)
	q.noCharts = true
	q.limits = o.limits
	ev, err := answer(stderr, args, q)
	if err != nil {
		return err
	}
	r := report.New(ev, report.Options{View: report.ViewCheck, Format: o.format, SourceRoot: o.sourceRoot, Version: version})
	if err := report.Generate(stdout, r); err != nil {
		return err
	}
	return exitOf(ev, q.gate)
}
