package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newCheckCmd) }

type checkOptions struct {
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

Exit status: 0 when no finding has error severity, 1 when one does, 2 for bad
input. --format markdown fits $GITHUB_STEP_SUMMARY and PR comments; --format
sarif feeds GitHub code scanning, which then annotates the leaking line: file
URIs are relative to --source-root (default: the git work tree of the current
directory), and a file outside it is named in the message only.`,
		Example: `  torchmem check trace.json.gz
  torchmem check traces/ --rules torchmem.yaml --format markdown >> "$GITHUB_STEP_SUMMARY"
  torchmem check trace.json.gz --format sarif > torchmem.sarif`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	cmd.Flags().StringVar(&o.rulesFile, "rules", "", "YAML file with rule thresholds, severities and disabled rules")
	cmd.Flags().StringVar(&o.format, "format", formatText, "output format: text, json, markdown, sarif")
	cmd.Flags().StringVar(&o.sourceRoot, "source-root", "", "SARIF: make file URIs relative to DIR (default: the git work tree of the current directory, else the current directory)")
	return cmd
}

// loadRules returns the built-in rules with a config file's overrides.
func loadRules(path string) ([]rules.Rule, *rules.Config, error) {
	rs := rules.Builtin()
	if path == "" {
		return rs, nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, badInput(load.FileError(path, err))
	}
	defer f.Close()
	cfg, err := rules.ParseConfig(f)
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	rs, err = cfg.Apply(rs)
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	return rs, cfg, nil
}

// evaluate loads every input and runs the rules on each.
// With the built-in thresholds (bounded), many inputs are read into
// summaries to bound memory.
func evaluate(args []string, rs []rules.Rule, stderr io.Writer, bounded bool) ([]rules.Finding, []*rules.Input, []rules.Verdict, error) {
	inputs, err := loadRuleInputs(stderr, args, "check", bounded)
	if err != nil {
		return nil, nil, nil, err
	}
	var all []rules.Finding
	for _, in := range inputs {
		all = append(all, rules.Run(rs, in)...)
	}
	// One verdict per run and rank; one finding per leak across its files.
	verdicts := rules.JudgeAll(inputs)
	all = rules.MergeLeakFindings(verdicts, all)
	slices.SortStableFunc(all, func(a, b rules.Finding) int { return int(b.Severity) - int(a.Severity) })
	return all, inputs, verdicts, nil
}

func runCheck(stdout, stderr io.Writer, args []string, o *checkOptions) error {
	if err := checkFormat(o.format, formatText, formatJSON, formatMarkdown, formatSARIF); err != nil {
		return err
	}
	rs, _, err := loadRules(o.rulesFile)
	if err != nil {
		return err
	}
	fs, inputs, verdicts, err := evaluate(args, rs, stderr, o.rulesFile == "")
	if err != nil {
		return err
	}
	switch o.format {
	case formatJSON:
		errs, warns, infos := countBySeverity(fs)
		out := struct {
			Passed     bool            `json:"passed"`
			Errors     int             `json:"errors"`
			Warnings   int             `json:"warnings"`
			Notes      int             `json:"notes"`
			Verdicts   []rules.Verdict `json:"verdicts"`
			Checklists []checklistJSON `json:"checklists"`
			Findings   []rules.Finding `json:"findings"`
		}{errs == 0, errs, warns, infos, verdicts, checklistsJSON(verdicts, fs), fs}
		if out.Findings == nil {
			out.Findings = []rules.Finding{}
		}
		if err := writeJSON(stdout, out); err != nil {
			return err
		}
	case formatMarkdown:
		writeFindingsMarkdown(stdout, fs, len(inputs), verdicts)
	case formatSARIF:
		root := o.sourceRoot
		if root == "" {
			root = sourceRootDefault()
		} else if st, err := os.Stat(root); err != nil || !st.IsDir() {
			return badInput(fmt.Errorf("--source-root %s: not a directory", root))
		}
		if err := writeSARIF(stdout, fs, rs, root); err != nil {
			return err
		}
	default:
		fmt.Fprintln(stdout, verdictLine(fs, len(inputs)))
		fmt.Fprintln(stdout)
		writeVerdictText(stdout, verdicts, termWidth())
		writeChecklistText(stdout, verdicts, fs)
		writeFindingsText(stdout, fs)
	}
	if errs, _, _ := countBySeverity(fs); errs > 0 {
		return findings()
	}
	return nil
}
