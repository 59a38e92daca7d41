package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/rules"
)

func init() {
	subcommands = append(subcommands, newReportCmd)
}

// pageTop is the number of table rows on the page when analyze -o writes
// it (report's --top default).
const pageTop = 15

func newReportCmd() *cobra.Command {
	var output, rulesFile string
	var top int
	cmd := &cobra.Command{
		Use:   "report INPUT... -o report.html",
		Short: "Write one self-contained HTML report with memory-over-time charts, to attach to a pull request",
		Long: `Writes one HTML file that works offline, forever: the charting library is
embedded and the page requests nothing from the network. Inputs are traces,
directories of per-rank traces, export_memory_timeline files (.json, .json.gz,
.raw.json.gz), allocator snapshots, nvidia-smi logs and per-step memory logs,
each recognized by its content.

Per input: a summary, memory over time (allocated and reserved per GPU, with
ProfilerStep bands, zoom and out-of-memory markers; per-category stacked areas
for memory timelines; used memory per GPU for nvidia-smi; under a trace's or
a snapshot history's chart an explorer: drag across the chart to list the
allocations alive or allocated in that range, sortable, and click one for
its stack), the top operators
and allocation sites, the leak verdict with its suspects, and every finding of
the rules with what to do.

` + exitPolicy,
		Example: `  torchmem report trace.json.gz -o report.html
  torchmem report traces/ snapshot.pickle memory_timeline.json.gz -o report.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "" {
				return badInput(fmt.Errorf("say where to write the report: -o report.html"))
			}
			if err := checkOutput(output, args); err != nil {
				return err
			}
			rs, _, err := loadRules(rulesFile)
			if err != nil {
				return err
			}
			q := judged("report", rs, rulesFile, &report.AllocationSites)
			q.limits = limitsOf(cmd)
			q.options.Page = true
			ev, err := answer(cmd.ErrOrStderr(), args, q)
			if err != nil {
				return err
			}
			if err := writePageFile(output, ev, top); err != nil {
				return err
			}
			if err := report.Generate(cmd.OutOrStdout(), report.New(ev, report.Options{View: report.ViewWrote, Output: output})); err != nil {
				return err
			}
			return exitOf(ev, q.gate)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "the HTML file to write")
	cmd.Flags().StringVar(&rulesFile, "rules", "", "YAML rules config for the findings (as for check)")
	cmd.Flags().IntVar(&top, "top", pageTop, "rows in the operator and site tables")
	return cmd
}

// writePageFile writes the evaluation's HTML page to path (report, and
// analyze -o).
func writePageFile(path string, ev *rules.Evaluation, top int) error {
	return writeFile(path, func(f *os.File) error {
		return report.Generate(f, report.New(ev, report.Options{View: report.ViewPage, Format: report.HTML, Top: top, Version: version}))
	})
}

// writeFile creates path and writes it; what cannot be written or made
// from the inputs is bad input (exit 2).
func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return badInput(fmt.Errorf("-o %s: %w", path, err))
	}
	if err := write(f); err != nil {
		f.Close()
		return badInput(err)
	}
	return f.Close()
}
