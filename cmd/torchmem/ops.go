package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newOpsCmd) }

type opsOptions struct {
	limits  chrometrace.Limits // the readers' caps (the --max-* flags)
	sort    string
	top     int
	device  int
	format  string
	groupBy string
}

func newOpsCmd() *cobra.Command {
	o := &opsOptions{}
	cmd := &cobra.Command{
		Use:   "ops TRACE...",
		Short: "Per-operator GPU memory, exactly as torch's key_averages() computes it",
		Long: `Prints the per-operator memory table that
prof.key_averages().table(sort_by="self_cuda_memory_usage") prints inside the
training process, computed from the exported trace (.json or .json.gz, any
size), plus the number and mean size of the allocations each operator makes
itself.

Self CUDA Mem is what an operator allocated minus what it freed, outside its
child operators; CUDA Mem includes the children. Sizes use torch's units
(1 GB = 1024^3 bytes); JSON gives exact bytes.`,
		Example: `  torchmem ops trace.json.gz
  torchmem ops trace.json.gz --sort allocs --top 10
  torchmem ops trace.json.gz --group-by shape --format markdown
  torchmem ops trace.json.gz --format json | jq '.operators[0]'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limits = limitsOf(cmd)
			return runOps(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.sort, "sort", "self", "sort rows by: self (Self CUDA Mem), total (CUDA Mem), calls, allocs")
	f.IntVar(&o.top, "top", 25, "show the first N rows (0 = all)")
	f.IntVar(&o.device, "device", -1, "count memory of this GPU index only (-1 = all GPUs, as torch does)")
	f.StringVar(&o.format, "format", formatTable, "output format: table, json, csv, markdown")
	f.StringVar(&o.groupBy, "group-by", "name", "group rows by: name, shape (Input Dims, like group_by_input_shape=True), stack (Call stack, like group_by_stack_n=5)")
	return cmd
}

func runOps(stdout, stderr io.Writer, args []string, o *opsOptions) error {
	if err := checkFormat(o.format, formatTable, formatJSON, formatCSV, formatMarkdown); err != nil {
		return err
	}
	var by chrometrace.GroupBy
	switch o.groupBy {
	case "name":
		by = chrometrace.GroupByName
	case "shape":
		by = chrometrace.GroupByShape
	case "stack":
		by = chrometrace.GroupByStack
	default:
		return badInput(fmt.Errorf("unknown --group-by %q (want name, shape or stack)", o.groupBy))
	}
	if _, err := rules.OperatorOrder(o.sort); err != nil {
		return badInput(err)
	}
	// The operator table never looks at Python frames or flows: not
	// keeping them saves a third of the memory of a trace recorded with
	// with_stack.
	q := question{command: "ops", kinds: []load.Kind{load.Trace}, fallback: load.Trace, gate: gateNone,
		trace:   chrometrace.ReadOptions{SkipPyFrames: true, SkipFlows: true},
		options: rules.Options{Tables: &rules.TableQuery{Operators: &rules.OperatorQuery{Device: o.device, GroupBy: by, Sort: o.sort, Top: o.top}}}}
	q.limits = o.limits
	ev, err := answer(stderr, args, q)
	if err != nil {
		return err
	}
	return report.Generate(stdout, report.New(ev, report.Options{View: report.ViewOps, Format: o.format}))
}
