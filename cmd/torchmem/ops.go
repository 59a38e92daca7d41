package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline"
)

func init() { subcommands = append(subcommands, newOpsCmd) }

type opsOptions struct {
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

// opsJSON is the documented --format json shape.
type opsJSON struct {
	Trace     string               `json:"trace"`
	Summary   chrometrace.Summary  `json:"summary"`
	Warnings  []string             `json:"warnings"`
	Operators []report.OperatorRow `json:"operators"`
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
	less, err := operatorOrder(o.sort)
	if err != nil {
		return err
	}
	// The operator table never looks at Python frames or flows: not
	// keeping them saves a third of the memory of a trace recorded with
	// with_stack.
	files, err := loadFilesWith(stderr, args, "ops", chrometrace.ReadOptions{SkipPyFrames: true, SkipFlows: true}, load.Trace, load.Trace)
	if err != nil {
		return err
	}
	return eachInput(stdout, o.format, files, func(w io.Writer, f *load.File) error {
		label := ""
		if len(files) > 1 {
			label = f.Path
		}
		return writeOps(w, f.Path, label, f.Trace, by, less, o)
	})
}

// writeOps prints one trace's operator table. label, when set, names the
// trace in a CSV column (several traces in one CSV).
func writeOps(stdout io.Writer, path, label string, t *chrometrace.Trace, by chrometrace.GroupBy, less func(a, b chrometrace.OperatorStats) int, o *opsOptions) error {
	rows := chrometrace.Operators(t, chrometrace.OperatorOptions{Device: o.device, GroupBy: by})
	slices.SortStableFunc(rows, less)
	if o.top > 0 && len(rows) > o.top {
		rows = rows[:o.top]
	}
	sum := chrometrace.Summarize(t, o.device)

	if o.format == formatJSON {
		out := opsJSON{Trace: path, Summary: sum, Warnings: t.Warnings, Operators: []report.OperatorRow{}}
		if out.Warnings == nil {
			out.Warnings = []string{}
		}
		for _, r := range rows {
			out.Operators = append(out.Operators, report.OperatorRow{
				Name: r.Name, InputShapes: r.InputShapes, Stack: r.Stack, OnDevice: r.OnDevice,
				Calls: r.Calls, SelfDeviceMemoryBytes: r.SelfDeviceMemory, DeviceMemoryBytes: r.DeviceMemory,
				SelfCPUMemoryBytes: r.SelfCPUMemory, CPUMemoryBytes: r.CPUMemory,
				Allocs: r.Allocs, AllocBytes: r.AllocBytes, MeanAllocBytes: report.MeanAlloc(r),
			})
		}
		return writeJSON(stdout, out)
	}
	if o.format == formatTable {
		report.WriteTraceSummary(stdout, path, t, sum)
	}
	if o.format == formatMarkdown && label != "" {
		fmt.Fprintf(stdout, "### %s\n\n", mdEscape(path))
	}
	writeOperatorTable(stdout, rows, by, o.format, label)
	return nil
}

// operatorOrder returns the row order for --sort: largest first, ties by name.
func operatorOrder(key string) (func(a, b chrometrace.OperatorStats) int, error) {
	var val func(r *chrometrace.OperatorStats) int64
	switch key {
	case "self":
		val = func(r *chrometrace.OperatorStats) int64 { return r.SelfDeviceMemory }
	case "total":
		val = func(r *chrometrace.OperatorStats) int64 { return r.DeviceMemory }
	case "calls":
		val = func(r *chrometrace.OperatorStats) int64 { return r.Calls }
	case "allocs":
		val = func(r *chrometrace.OperatorStats) int64 { return r.Allocs }
	default:
		return nil, badInput(fmt.Errorf("unknown --sort %q (want self, total, calls or allocs)", key))
	}
	return func(a, b chrometrace.OperatorStats) int {
		return cmp.Or(cmp.Compare(val(&b), val(&a)), strings.Compare(a.Name, b.Name))
	}, nil
}

func writeOperatorTable(w io.Writer, rows []chrometrace.OperatorStats, by chrometrace.GroupBy, format, label string) {
	showCPU := false
	for _, r := range rows {
		if r.SelfCPUMemory != 0 || r.CPUMemory != 0 {
			showCPU = true
		}
	}
	tw := newTableWriter()
	header := table.Row{"Name", "Self CUDA Mem", "CUDA Mem", "# of Calls", "# Allocs", "CUDA Mem Size"}
	if showCPU {
		header = append(header, "Self CPU Mem", "CPU Mem")
	}
	switch by {
	case chrometrace.GroupByShape:
		header = append(header, "Input Shapes")
	case chrometrace.GroupByStack:
		header = append(header, "Source Location")
	}
	tw.AppendHeader(header)
	bytesCol := func(n int64) string {
		if format == formatCSV {
			return strconv.FormatInt(n, 10)
		}
		return memtimeline.FormatBytes(n)
	}
	for _, r := range rows {
		name := r.Name
		if format == formatTable && len(name) > 60 {
			name = name[:57] + "..."
		}
		mean := "-"
		if r.Allocs > 0 {
			mean = bytesCol(report.MeanAlloc(r))
		}
		row := table.Row{name, bytesCol(r.SelfDeviceMemory), bytesCol(r.DeviceMemory), r.Calls, r.Allocs, mean}
		if showCPU {
			row = append(row, bytesCol(r.SelfCPUMemory), bytesCol(r.CPUMemory))
		}
		switch by {
		case chrometrace.GroupByShape:
			row = append(row, r.InputShapes)
		case chrometrace.GroupByStack:
			row = append(row, strings.Join(r.Stack, "\n"))
		}
		if label != "" && format == formatCSV {
			row = append(table.Row{label}, row...)
		}
		tw.AppendRow(row)
	}
	cfg := []table.ColumnConfig{}
	for i := 2; i <= 6; i++ {
		cfg = append(cfg, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	tw.SetColumnConfigs(cfg)
	if format == formatCSV {
		// CSV gets exact bytes; say so in the header.
		h := table.Row{"Name", "Self CUDA Mem (bytes)", "CUDA Mem (bytes)", "# of Calls", "# Allocs", "CUDA Mem Size (bytes)"}
		if showCPU {
			h = append(h, "Self CPU Mem (bytes)", "CPU Mem (bytes)")
		}
		h = append(h, header[len(h):]...)
		if label != "" {
			h = append(table.Row{"Trace"}, h...)
		}
		tw.ResetHeaders()
		tw.AppendHeader(h)
	}
	renderTable(w, tw, format)
}
