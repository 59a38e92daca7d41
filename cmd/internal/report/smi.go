package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/rules"
)

// writeSMI renders each log's memoized analysis (the Evaluation's).
func (r *Report) writeSMI(w io.Writer) error {
	tables := tablesOf(r.Eval)
	return EachInput(w, r.Format, r.Eval.Inputs, func(out io.Writer, in *rules.Input) error {
		t := tables[in]
		if in.Has(rules.SourceSMIApps) {
			return writeSMIApps(out, r.Format, t)
		}
		if t == nil || t.SMI == nil {
			t = &rules.Table{Input: in, SMI: &smi.Analysis{}}
		}
		path := in.Source
		switch r.Format {
		case JSON:
			return WriteJSON(out, smiJSONReport(path, t))
		case Markdown:
			return MarkdownFenced(out, path, func(w io.Writer) error { writeSMITable(w, path, t); return nil })
		}
		writeSMITable(out, path, t)
		return nil
	})
}

// smiClock prints a sample time; the date only when the log spans days.
func smiClock(t time.Time, withDate bool) string {
	if withDate {
		return t.Format(smi.TimeLayout)
	}
	return t.Format("15:04:05.000")
}

// writeSMITable prints one GPU log's analysis, GPU by GPU.
func writeSMITable(w io.Writer, path string, tb *rules.Table) {
	a := *tb.SMI
	o := a.Options
	for i, g := range a.GPUs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		multiDay := g.Start.YearDay() != g.End.YearDay() || g.Start.Year() != g.End.Year()
		clock := func(t time.Time) string { return smiClock(t, multiDay) }
		title := "GPU " + g.Key
		if g.Name != "" {
			title += " (" + g.Name + ")"
		}
		// The answer first, in every command's words.
		if len(g.Leaks) > 0 {
			var grew int64
			for _, l := range g.Leaks {
				grew += l.GrowthBytes
			}
			fmt.Fprintf(w, "LEAK: %s: GPU %s: memory.used grew %s steadily in %s\n", path, g.Key, memtimeline.FormatBytes(grew), count(len(g.Leaks), "stretch", "stretches"))
		} else {
			fmt.Fprintf(w, "CLEAN: %s: GPU %s: no steady growth of memory.used lasting %s\n", path, g.Key, o.MinGrowthDuration)
		}
		fmt.Fprintf(w, "%s: %s, %d samples every %s from %s to %s (%s)\n", path, title, g.Samples,
			memtimeline.FormatDuration(g.Interval), g.Start.Format(smi.TimeLayout), clock(g.End), memtimeline.FormatDuration(g.End.Sub(g.Start)))
		mem := fmt.Sprintf("  memory.used peak %s at %s, last %s", memtimeline.FormatBytes(g.PeakUsedBytes), clock(g.PeakTime), memtimeline.FormatBytes(g.FinalUsedBytes))
		if g.TotalBytes > 0 {
			mem += fmt.Sprintf(" of %s total (peak %.1f%%)", memtimeline.FormatBytes(g.TotalBytes), 100*float64(g.PeakUsedBytes)/float64(g.TotalBytes))
		}
		fmt.Fprintln(w, mem)
		if g.MeanUtilGPUPct >= 0 {
			fmt.Fprintf(w, "  utilization.gpu mean %.1f%%, max %.0f%%\n", g.MeanUtilGPUPct, g.MaxUtilGPUPct)
		} else {
			fmt.Fprintln(w, "  utilization.gpu not logged: no starvation check")
		}

		if spark := smiSparklines(tb.SMITimeline[i], g); spark != "" {
			fmt.Fprint(w, spark)
		}

		fmt.Fprintln(w)
		if len(g.Leaks) == 0 {
			if o.MinGrowthBytes > 0 {
				fmt.Fprintf(w, "Steady growth: none of %s or more lasting %s\n", memtimeline.FormatBytes(o.MinGrowthBytes), o.MinGrowthDuration)
			} else {
				fmt.Fprintf(w, "Steady growth: none lasting %s\n", o.MinGrowthDuration)
			}
			if r := g.StillGrowing; r != nil {
				fmt.Fprintf(w, "  but memory.used was still rising at the end: %s from %s to %s, %.1f MiB/s (%s); too short to call, log longer\n",
					memtimeline.FormatBytes(r.GrowthBytes), clock(r.Start), clock(r.End), r.SlopeBytesPerSec/(1<<20), r.Reason)
			}
		} else {
			fmt.Fprintf(w, "Steady growth (a leak) in %s:\n", count(len(g.Leaks), "stretch", "stretches"))
			t := NewTable()
			t.AppendHeader(table.Row{"start", "end", "duration", "from", "to", "growth", "rate MiB/s", "R^2", "new highs", "samples", "then"})
			for _, l := range g.Leaks {
				then := "log ends"
				if l.DroppedTo >= 0 {
					then = fmt.Sprintf("falls to %s at %s", memtimeline.FormatBytes(l.DroppedTo), clock(l.DropTime))
				}
				t.AppendRow(table.Row{clock(l.Start), clock(l.End), memtimeline.FormatDuration(l.Duration), memtimeline.FormatBytes(l.StartBytes), memtimeline.FormatBytes(l.EndBytes),
					memtimeline.FormatBytes(l.GrowthBytes), fmt.Sprintf("%.1f", l.SlopeBytesPerSec/(1<<20)), fmt.Sprintf("%.3f", l.R2), l.Rises, l.Samples, then})
			}
			fmt.Fprintln(w, t.Render())
		}
		if other, hidden := tb.SMIRuns[i], tb.SMIRunsHidden[i]; len(other) > 0 {
			fmt.Fprintf(w, "Growth runs that are not leaks (%d):\n", len(other)+hidden)
			t := NewTable()
			t.AppendHeader(table.Row{"start", "end", "duration", "from", "to", "R^2", "why not a leak"})
			for _, r := range other {
				t.AppendRow(table.Row{clock(r.Start), clock(r.End), memtimeline.FormatDuration(r.Duration), memtimeline.FormatBytes(r.StartBytes), memtimeline.FormatBytes(r.EndBytes),
					fmt.Sprintf("%.2f", r.R2), r.Reason})
			}
			fmt.Fprintln(w, t.Render())
			if hidden > 0 {
				fmt.Fprintf(w, "(the %d longest shown; %d shorter ones in --format json)\n", len(other), hidden)
			}
		}

		fmt.Fprintln(w)
		if g.MeanUtilGPUPct >= 0 {
			if len(g.Starvation) == 0 {
				fmt.Fprintf(w, "Memory held, GPU idle: none (>= %.0f%% of peak memory at <= %.0f%% utilization for %s)\n",
					100*o.StarveMemFraction, o.StarveUtilPct, o.MinStarveDuration)
			} else {
				fmt.Fprintf(w, "Memory held, GPU idle (>= %.0f%% of peak memory at <= %.0f%% utilization; input pipeline starving the GPU?):\n",
					100*o.StarveMemFraction, o.StarveUtilPct)
				t := NewTable()
				t.AppendHeader(table.Row{"start", "end", "duration", "mean used", "mean util %", "samples"})
				for _, p := range g.Starvation {
					t.AppendRow(table.Row{clock(p.Start), clock(p.End), memtimeline.FormatDuration(p.Duration), memtimeline.FormatBytes(p.MeanUsedBytes),
						fmt.Sprintf("%.1f", p.MeanUtilGPUPct), p.Samples})
				}
				fmt.Fprintln(w, t.Render())
			}
		}

		al := g.AboveThreshold
		if al.ThresholdBytes < 0 {
			fmt.Fprintf(w, "Above %.0f%% of memory.total: memory.total not logged\n", 100*al.Threshold)
			continue
		}
		fmt.Fprintf(w, "Above %.0f%% of memory.total (%s): %s in %s\n", 100*al.Threshold, memtimeline.FormatBytes(al.ThresholdBytes),
			memtimeline.FormatDuration(al.Duration), count(len(al.Periods), "period", "periods"))
		if len(al.Periods) > 0 {
			t := NewTable()
			t.AppendHeader(table.Row{"start", "end", "duration", "max used", "samples"})
			for _, p := range al.Periods {
				t.AppendRow(table.Row{clock(p.Start), clock(p.End), memtimeline.FormatDuration(p.Duration), memtimeline.FormatBytes(p.MaxUsedBytes), p.Samples})
			}
			fmt.Fprintln(w, t.Render())
		}
	}
}

// smiSparklines draws memory.used (max per column, scaled to the GPU's
// peak) and utilization.gpu (mean per column, 0-100%) over time.
func smiSparklines(buckets []smi.Bucket, g smi.GPUReport) string {
	if len(buckets) < 2 || g.PeakUsedBytes <= 0 {
		return ""
	}
	levels := []rune("▁▂▃▄▅▆▇█")
	level := func(v, top float64) rune {
		i := int(v / top * float64(len(levels)-1))
		return levels[min(max(i, 0), len(levels)-1)]
	}
	var mem, util strings.Builder
	for _, b := range buckets {
		switch {
		case b.MaxUsedBytes < 0:
			mem.WriteRune(' ')
		default:
			mem.WriteRune(level(float64(b.MaxUsedBytes), float64(g.PeakUsedBytes)))
		}
		switch {
		case b.MeanUtilGPUPct < 0:
			util.WriteRune(' ')
		default:
			util.WriteRune(level(b.MeanUtilGPUPct, 100))
		}
	}
	step := memtimeline.FormatDuration(buckets[0].End.Sub(buckets[0].Start))
	out := fmt.Sprintf("  memory.used     %s  (0 to %s, %s a column)\n", mem.String(), memtimeline.FormatBytes(g.PeakUsedBytes), step)
	if g.MeanUtilGPUPct >= 0 {
		out += fmt.Sprintf("  utilization.gpu %s  (0 to 100%%)\n", util.String())
	}
	return out
}

// JSON shapes: bytes are exact integers; times are nvidia-smi's layout
// (local time, as the log has no zone); durations are seconds.

type smiGrowthJSON struct {
	Start            string  `json:"start"`
	End              string  `json:"end"`
	DurationS        float64 `json:"duration_s"`
	Samples          int     `json:"samples"`
	NewHighs         int     `json:"new_highs"`
	StartBytes       int64   `json:"start_bytes"`
	EndBytes         int64   `json:"end_bytes"`
	GrowthBytes      int64   `json:"growth_bytes"`
	LargestRiseBytes int64   `json:"largest_rise_bytes"`
	LongestStallS    float64 `json:"longest_stall_s"`
	SlopeBytesPerS   float64 `json:"slope_bytes_per_s"`
	SlopeMiBPerS     float64 `json:"slope_mib_per_s"`
	R2               float64 `json:"r2"`
	Leak             bool    `json:"leak"`
	Reason           string  `json:"reason"`
	DroppedToBytes   *int64  `json:"dropped_to_bytes"`
	DropTime         *string `json:"drop_time"`
	Released         bool    `json:"released"`
}

type smiPeriodJSON struct {
	Start          string   `json:"start"`
	End            string   `json:"end"`
	DurationS      float64  `json:"duration_s"`
	Samples        int      `json:"samples"`
	MeanUsedBytes  int64    `json:"mean_used_bytes"`
	MaxUsedBytes   int64    `json:"max_used_bytes"`
	MeanUtilGPUPct *float64 `json:"mean_utilization_gpu_pct"`
}

type smiAlarmJSON struct {
	Threshold      float64         `json:"threshold"`
	ThresholdBytes *int64          `json:"threshold_bytes"`
	DurationS      float64         `json:"duration_s"`
	Samples        int             `json:"samples"`
	Periods        []smiPeriodJSON `json:"periods"`
}

type smiGPUJSON struct {
	GPU            string          `json:"gpu"`
	Index          *int            `json:"index"`
	Name           string          `json:"name,omitempty"`
	BusID          string          `json:"pci_bus_id,omitempty"`
	UUID           string          `json:"uuid,omitempty"`
	Samples        int             `json:"samples"`
	Start          string          `json:"start"`
	End            string          `json:"end"`
	IntervalS      float64         `json:"interval_s"`
	TotalBytes     *int64          `json:"total_bytes"`
	PeakUsedBytes  int64           `json:"peak_used_bytes"`
	PeakTime       string          `json:"peak_time"`
	FinalUsedBytes int64           `json:"final_used_bytes"`
	MeanUtilGPUPct *float64        `json:"mean_utilization_gpu_pct"`
	MaxUtilGPUPct  *float64        `json:"max_utilization_gpu_pct"`
	Leaks          []smiGrowthJSON `json:"leaks"`
	GrowthRuns     []smiGrowthJSON `json:"growth_runs"`
	// StillGrowing: growth too short to judge, still going on when the
	// process or the log ended.
	StillGrowing   *smiGrowthJSON  `json:"still_growing,omitempty"`
	Starvation     []smiPeriodJSON `json:"memory_held_gpu_idle"`
	AboveThreshold smiAlarmJSON    `json:"above_threshold"`
	Timeline       []smiBucketJSON `json:"timeline"`
}

type smiBucketJSON struct {
	Start          string   `json:"start"`
	End            string   `json:"end"`
	Samples        int      `json:"samples"`
	MinUsedBytes   *int64   `json:"min_used_bytes"`
	MaxUsedBytes   *int64   `json:"max_used_bytes"`
	MeanUtilGPUPct *float64 `json:"mean_utilization_gpu_pct"`
}

type smiReportJSON struct {
	File     string       `json:"file"`
	Columns  []string     `json:"columns"`
	Inferred bool         `json:"header_inferred"`
	Rows     int          `json:"rows"`
	Warnings []string     `json:"warnings"`
	Options  any          `json:"options"`
	GPUs     []smiGPUJSON `json:"gpus"`
}

// smiRound keeps JSON floats short and stable across platforms.
func smiRound(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

func smiOptPct(x float64) *float64 {
	if x < 0 {
		return nil
	}
	v := smiRound(x, 2)
	return &v
}

func smiOptBytes(b int64) *int64 {
	if b < 0 {
		return nil
	}
	return &b
}

func smiGrowth(r smi.GrowthRun) smiGrowthJSON {
	j := smiGrowthJSON{
		Start: r.Start.Format(smi.TimeLayout), End: r.End.Format(smi.TimeLayout),
		DurationS: smiRound(r.Duration.Seconds(), 3), Samples: r.Samples, NewHighs: r.Rises,
		StartBytes: r.StartBytes, EndBytes: r.EndBytes, GrowthBytes: r.GrowthBytes,
		LargestRiseBytes: r.LargestRiseBytes, LongestStallS: smiRound(r.LongestStall.Seconds(), 3),
		SlopeBytesPerS: smiRound(r.SlopeBytesPerSec, 0), SlopeMiBPerS: smiRound(r.SlopeBytesPerSec/(1<<20), 3),
		R2: smiRound(r.R2, 4), Leak: r.Leak, Reason: r.Reason, Released: r.Released,
	}
	if r.DroppedTo >= 0 {
		b, ts := r.DroppedTo, r.DropTime.Format(smi.TimeLayout)
		j.DroppedToBytes, j.DropTime = &b, &ts
	}
	return j
}

func smiPeriods(ps []smi.Period) []smiPeriodJSON {
	out := []smiPeriodJSON{}
	for _, p := range ps {
		out = append(out, smiPeriodJSON{
			Start: p.Start.Format(smi.TimeLayout), End: p.End.Format(smi.TimeLayout),
			DurationS: smiRound(p.Duration.Seconds(), 3), Samples: p.Samples,
			MeanUsedBytes: p.MeanUsedBytes, MaxUsedBytes: p.MaxUsedBytes, MeanUtilGPUPct: smiOptPct(p.MeanUtilGPUPct),
		})
	}
	return out
}

func smiJSONReport(path string, t *rules.Table) smiReportJSON {
	log, a := t.Input.SMI, *t.SMI
	o := a.Options
	rep := smiReportJSON{
		File: path, Columns: log.Columns, Inferred: log.HeaderInferred, Rows: log.Rows, Warnings: log.Warnings,
		Options: map[string]any{
			"threshold":                  o.Threshold,
			"min_growth_duration_s":      o.MinGrowthDuration.Seconds(),
			"min_growth_samples":         o.MinGrowthSamples,
			"min_growth_new_highs":       o.MinGrowthRises,
			"min_growth_bytes":           o.MinGrowthBytes,
			"max_rise_fraction":          o.MaxRiseFraction,
			"min_growth_r2":              o.MinGrowthR2,
			"jitter_bytes":               o.JitterBytes,
			"jitter_fraction":            o.JitterFraction,
			"starve_memory_fraction":     o.StarveMemFraction,
			"starve_min_bytes":           o.StarveMinBytes,
			"starve_utilization_gpu_pct": o.StarveUtilPct,
			"min_starve_duration_s":      o.MinStarveDuration.Seconds(),
		},
	}
	if rep.Warnings == nil {
		rep.Warnings = []string{}
	}
	for i, g := range a.GPUs {
		j := smiGPUJSON{
			GPU: g.Key, Name: g.Name, BusID: g.BusID, UUID: g.UUID, Samples: g.Samples,
			Start: g.Start.Format(smi.TimeLayout), End: g.End.Format(smi.TimeLayout),
			IntervalS: smiRound(g.Interval.Seconds(), 3), TotalBytes: smiOptBytes(g.TotalBytes),
			PeakUsedBytes: g.PeakUsedBytes, PeakTime: g.PeakTime.Format(smi.TimeLayout),
			FinalUsedBytes: g.FinalUsedBytes, MeanUtilGPUPct: smiOptPct(g.MeanUtilGPUPct), MaxUtilGPUPct: smiOptPct(g.MaxUtilGPUPct),
			Leaks: []smiGrowthJSON{}, GrowthRuns: []smiGrowthJSON{}, Starvation: smiPeriods(g.Starvation),
			AboveThreshold: smiAlarmJSON{Threshold: g.AboveThreshold.Threshold, ThresholdBytes: smiOptBytes(g.AboveThreshold.ThresholdBytes),
				DurationS: smiRound(g.AboveThreshold.Duration.Seconds(), 3), Samples: g.AboveThreshold.Samples,
				Periods: smiPeriods(g.AboveThreshold.Periods)},
		}
		if g.Index >= 0 {
			idx := g.Index
			j.Index = &idx
		}
		for _, l := range g.Leaks {
			j.Leaks = append(j.Leaks, smiGrowth(l))
		}
		j.Timeline = []smiBucketJSON{}
		for _, b := range t.SMITimeline[i] {
			j.Timeline = append(j.Timeline, smiBucketJSON{
				Start: b.Start.Format(smi.TimeLayout), End: b.End.Format(smi.TimeLayout), Samples: b.Samples,
				MinUsedBytes: smiOptBytes(b.MinUsedBytes), MaxUsedBytes: smiOptBytes(b.MaxUsedBytes), MeanUtilGPUPct: smiOptPct(b.MeanUtilGPUPct),
			})
		}
		for _, r := range g.Runs {
			j.GrowthRuns = append(j.GrowthRuns, smiGrowth(r))
		}
		if r := g.StillGrowing; r != nil {
			sg := smiGrowth(*r)
			j.StillGrowing = &sg
		}
		rep.GPUs = append(rep.GPUs, j)
	}
	return rep
}
