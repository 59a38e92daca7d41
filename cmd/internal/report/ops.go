package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// OperatorTable is one trace's operator rows in the ops view, already
// grouped, sorted and cut to --top.
type OperatorTable struct {
	Path    string
	Trace   *chrometrace.Trace
	Summary chrometrace.Summary
	Rows    []chrometrace.OperatorStats
	GroupBy chrometrace.GroupBy
}

// tables takes the evaluation's tables of the table views (ops, stacks,
// snapshot), one per input of the view's kind.
func (r *Report) tables(ts []rules.Table) {
	for _, t := range ts {
		in := t.Input
		switch {
		case r.View == ViewOps && in.Has(rules.SourceTrace):
			r.Operators = append(r.Operators, OperatorTable{Path: in.Source, Trace: in.Trace, Summary: t.Summary, Rows: t.Operators, GroupBy: r.Eval.Options.Tables.Operators.GroupBy})
		case r.View == ViewStacks && in.Has(rules.SourceTrace):
			r.Stacks = append(r.Stacks, SiteTable{Path: in.Source, Sites: t.Sites})
		case r.View == ViewSnapshot && t.Snapshot != nil:
			r.Snapshots = append(r.Snapshots, SnapshotFile{Path: in.Source, Report: t.Snapshot})
		}
	}
}

// writeOperators writes each trace's table; with several traces a CSV names the
// trace in a first column, Markdown in a heading.
func (r *Report) writeOperators(w io.Writer) error {
	return EachInput(w, r.Format, r.Operators, func(w io.Writer, t OperatorTable) error {
		label := ""
		if len(r.Operators) > 1 {
			label = t.Path
		}
		return writeOps(w, t, label, r.Format)
	})
}

// opsJSON is the documented --format json shape.
type opsJSON struct {
	Trace     string              `json:"trace"`
	Summary   chrometrace.Summary `json:"summary"`
	Warnings  []string            `json:"warnings"`
	Operators []OperatorRow       `json:"operators"`
}

// writeOps prints one trace's operator table. label, when set, names the
// trace in a CSV column (several traces in one CSV).
func writeOps(w io.Writer, t OperatorTable, label, format string) error {
	rows := t.Rows
	if format == JSON {
		out := opsJSON{Trace: t.Path, Summary: t.Summary, Warnings: t.Trace.Warnings, Operators: []OperatorRow{}}
		for _, r := range rows {
			out.Operators = append(out.Operators, OperatorRow{
				Name: r.Name, InputShapes: r.InputShapes, Stack: r.Stack, OnDevice: r.OnDevice,
				Calls: r.Calls, SelfDeviceMemoryBytes: r.SelfDeviceMemory, DeviceMemoryBytes: r.DeviceMemory,
				SelfCPUMemoryBytes: r.SelfCPUMemory, CPUMemoryBytes: r.CPUMemory,
				Allocs: r.Allocs, AllocBytes: r.AllocBytes, MeanAllocBytes: meanAlloc(r),
			})
		}
		return WriteJSON(w, out)
	}
	if format == Text {
		writeTraceSummary(w, t.Path, t.Trace, t.Summary)
	}
	if format == Markdown && label != "" {
		fmt.Fprintf(w, "### %s\n\n", mdEscape(t.Path))
	}
	writeOperatorTable(w, rows, t.GroupBy, format, label)
	return nil
}

func writeOperatorTable(w io.Writer, rows []chrometrace.OperatorStats, by chrometrace.GroupBy, format, label string) {
	showCPU := false
	for _, r := range rows {
		if r.SelfCPUMemory != 0 || r.CPUMemory != 0 {
			showCPU = true
		}
	}
	tw := NewTable()
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
		if format == CSV {
			return strconv.FormatInt(n, 10)
		}
		return memtimeline.FormatBytes(n)
	}
	for _, r := range rows {
		name := r.Name // whole: the table wraps a long name at its joints
		mean := "-"
		if r.Allocs > 0 {
			mean = bytesCol(meanAlloc(r))
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
		if label != "" && format == CSV {
			row = append(table.Row{label}, row...)
		}
		tw.AppendRow(row)
	}
	cfg := []table.ColumnConfig{}
	for i := 2; i <= 6; i++ {
		cfg = append(cfg, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	tw.SetColumnConfigs(cfg)
	if format == CSV {
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
	Table(w, tw, format)
}
