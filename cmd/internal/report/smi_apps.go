package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/rules"
)

// torchmem smi on an nvidia-smi --query-compute-apps log: memory per
// process, zombies, processes sharing a GPU, the process that grows. The
// GPU log of the same folder (when one was given) lends its utilization and
// its end of log.

// smiAppsJSON is --format json for a compute-apps log.
type smiAppsJSON struct {
	File     string           `json:"file"`
	Kind     rules.SourceKind `json:"kind"`
	GPULog   bool             `json:"with_gpu_log"`
	Columns  []string         `json:"columns"`
	Rows     int              `json:"rows"`
	Rounds   int              `json:"rounds"`
	Warnings []string         `json:"warnings"`
	Analysis smi.AppsAnalysis `json:"analysis"`
}

// writeSMIApps writes the per-process log's analysis beside its GPU
// log (the Evaluation's memoized one); the exit status is the
// Evaluation's, not the table's.
func writeSMIApps(out io.Writer, format string, t *rules.Table) error {
	in := t.Input
	a, log, withGPU := *t.Apps, in.SMIApps, t.AppsGPU != nil
	switch format {
	case JSON:
		w := log.Warnings
		if w == nil {
			w = []string{}
		}
		if a.Processes == nil {
			a.Processes = []smi.ProcessReport{}
		}
		return WriteJSON(out, smiAppsJSON{File: in.Source, Kind: in.Kind, GPULog: withGPU, Columns: log.Columns,
			Rows: log.Rows, Rounds: log.Rounds, Warnings: w, Analysis: a})
	case Markdown:
		return MarkdownFenced(out, in.Source, func(w io.Writer) error { writeSMIAppsTable(w, in.Source, log, withGPU, a); return nil })
	}
	writeSMIAppsTable(out, in.Source, log, withGPU, a)
	return nil
}

func writeSMIAppsTable(w io.Writer, path string, log *smi.AppsLog, withGPU bool, a smi.AppsAnalysis) {
	when := "one query"
	if log.Rounds > 1 {
		when = fmt.Sprintf("%d sampling rounds", log.Rounds)
		if a.Interval > 0 && log.HasTime {
			when += " every " + memtimeline.FormatDuration(a.Interval)
		}
	}
	fmt.Fprintf(w, "%s: nvidia-smi per-process log, %s, %s\n", path, count(len(a.Processes), "process", "processes"), when)
	if !withGPU {
		fmt.Fprintln(w, "  (no GPU log beside it: give the --query-gpu log of the same run for utilization and the end of the run)")
	}
	if len(a.Processes) == 0 {
		fmt.Fprintln(w, "No process held GPU memory.")
		return
	}
	clock := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Format("15:04:05.000")
	}
	t := NewTable()
	t.AppendHeader(table.Row{"pid", "process", "GPU", "first", "last", "peak", "last value", "state"})
	for _, p := range a.Processes {
		gpu := p.GPUKey
		if gpu == "" {
			gpu = p.GPU
		}
		var state []string
		switch {
		case p.Zombie:
			state = append(state, "ZOMBIE: "+p.ZombieReason)
		case p.Exited:
			state = append(state, "exited")
		default:
			state = append(state, "running at the end")
		}
		if g := p.Grows; g != nil {
			state = append(state, fmt.Sprintf("GROWS %.1f MiB/s for %s (%s)", g.SlopeBytesPerSec/(1<<20), memtimeline.FormatDuration(g.Duration), g.Reason))
		} else if g := p.StillGrowing; g != nil {
			state = append(state, fmt.Sprintf("still growing at its end: %s in %s, %.1f MiB/s", memtimeline.FormatBytes(g.GrowthBytes), memtimeline.FormatDuration(g.Duration), g.SlopeBytesPerSec/(1<<20)))
		}
		t.AppendRow(table.Row{p.PID, p.Name, gpu, clock(p.First), clock(p.Last), smiBytesOrNA(p.PeakBytes), smiBytesOrNA(p.FinalBytes), strings.Join(state, "; ")})
	}
	fmt.Fprintln(w, t.Render())
	for _, s := range a.Sharing {
		var pids []string
		for _, pid := range s.PIDs {
			pids = append(pids, fmt.Sprint(pid))
		}
		span := ""
		if !s.Start.IsZero() {
			span = fmt.Sprintf(" from %s to %s", clock(s.Start), clock(s.End))
		}
		gpu := s.GPUKey
		if gpu == "" {
			gpu = s.GPU
		}
		if gpu != "" {
			gpu = " GPU " + gpu
		}
		fmt.Fprintf(w, "Shared%s%s: %s at once at most (pids %s), %s together at most\n", gpu, span, count(s.MaxProcesses, "process", "processes"), strings.Join(pids, ", "), memtimeline.FormatBytes(s.PeakBytes))
	}
	for _, u := range a.Unaccounted {
		fmt.Fprintf(w, "GPU %s: memory.used is %s above the processes' sum (median of %d rounds): memory no process holds (the driver's)\n", u.GPUKey, memtimeline.FormatBytes(u.Bytes), u.Samples)
	}
}

func smiBytesOrNA(b int64) string {
	if b < 0 {
		return "N/A"
	}
	return memtimeline.FormatBytes(b)
}
