package main

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
)

func init() { subcommands = append(subcommands, newAnalyzeCmd) }

type analyzeOptions struct {
	limits    chrometrace.Limits // the readers' caps (the --max-* flags)
	rulesFile string
	format    string
	top       int
	output    string
}

func newAnalyzeCmd() *cobra.Command {
	o := &analyzeOptions{}
	cmd := &cobra.Command{
		Use:   "analyze INPUT...",
		Short: "The one-screen diagnosis: where memory went, leaks, fragmentation, GPU timeline, what to do",
		Long: `Reads every input (traces, per-rank directories, allocator snapshots, nvidia-smi
logs, per-step memory logs; each recognized by its content) and prints what a
user checks first: the run's summary, the operators and Python lines that
allocate the most, the leak verdict, the fragmentation signs, GPU-timeline
problems (a sync every step, pageable copies, idle gaps), and every finding of
the rules with what to do next.

` + exitPolicy,
		Example: `  torchmem analyze trace.json.gz
  torchmem analyze traces/ snapshot.pickle --format markdown
  torchmem analyze trace.json.gz --format json | jq '.inputs[0].leaks.verdict'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limits = limitsOf(cmd)
			return runAnalyze(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.rulesFile, "rules", "", "YAML file with rule thresholds, severities and disabled rules (as for check)")
	f.StringVar(&o.format, "format", formatText, "output format: text, json, markdown")
	f.IntVar(&o.top, "top", 8, "rows in the operator and allocation-site tables")
	f.StringVarP(&o.output, "output", "o", "", "also write the HTML report to this file")
	return cmd
}

func runAnalyze(stdout, stderr io.Writer, args []string, o *analyzeOptions) error {
	if err := checkFormat(o.format, formatText, formatJSON, formatMarkdown); err != nil {
		return err
	}
	if err := checkOutput(o.output, args); err != nil {
		return err
	}
	rs, _, err := loadRules(o.rulesFile)
	if err != nil {
		return err
	}
	q := judged("analyze", rs, o.rulesFile, &report.AllocationSites)
	q.limits = o.limits
	q.options.Page = o.output != ""
	ev, err := answer(stderr, args, q)
	if err != nil {
		return err
	}
	if o.output != "" {
		if err := writePageFile(o.output, ev, pageTop); err != nil {
			return err
		}
	}
	r := report.New(ev, report.Options{View: report.ViewAnalyze, Format: o.format, Top: o.top})
	if err := report.Generate(stdout, r); err != nil {
		return err
	}
	return exitOf(ev, q.gate)
}
