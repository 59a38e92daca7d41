package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/growth"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules"
)

// writeSteps writes each log's table (Markdown fenced: its meaning is in
// the alignment) or JSON document.
func (r *Report) writeSteps(w io.Writer) error {
	tables := tablesOf(r.Eval)
	return EachInput(w, r.Format, r.Eval.Inputs, func(out io.Writer, in *rules.Input) error {
		path, log, a := in.Source, in.StepLog, steplog.Analysis{}
		if t := tables[in]; t != nil && t.Steps != nil {
			a = *t.Steps
		}
		switch r.Format {
		case JSON:
			return WriteJSON(out, stepsJSONReport(path, log, a))
		case Markdown:
			return MarkdownFenced(out, path, func(w io.Writer) error { writeStepsTable(w, path, log, a); return nil })
		}
		writeStepsTable(out, path, log, a)
		return nil
	})
}

func stepsKeyList(log *steplog.Log) string {
	var parts []string
	for q, k := range log.Keys {
		parts = append(parts, q+"="+k)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// stepsWord is a step log's verdict in the one vocabulary of every
// command's text: LEAK, CLEAN, UNKNOWN (steplog's growing, flat).
func stepsWord(v string) string {
	switch v {
	case steplog.VerdictGrowing:
		return "LEAK"
	case steplog.VerdictFlat:
		return "CLEAN"
	}
	return strings.ToUpper(v)
}

func writeStepsTable(w io.Writer, path string, log *steplog.Log, a steplog.Analysis) {
	// The answer first: each series' verdict and why, then the figures.
	for _, s := range a.Series {
		prefix := ""
		if s.Device != "" {
			prefix = "device " + s.Device + ": "
		}
		warm := ""
		if s.SkippedWarmup > 0 {
			warm = fmt.Sprintf(" (the first %s left out as warm-up)", count(s.SkippedWarmup, "step", "steps"))
		}
		fmt.Fprintf(w, "%s: %s: %s%s%s\n", stepsWord(s.Verdict), path, prefix, s.Reason, warm)
	}
	fmt.Fprintf(w, "%s: %s; keys %s\n", path, count(log.Lines, "record", "records"), stepsKeyList(log))
	t := NewTable()
	t.AppendHeader(table.Row{"device", "steps", "verdict", "allocated per step", "pattern", "fit R^2", "allocated first → last", "peak allocated (step)", "reserved per step", "peak reserved (step)"})
	for _, s := range a.Series {
		dev := s.Device
		if dev == "" {
			dev = "-"
		}
		steps := fmt.Sprintf("%d-%d", s.FirstStep, s.LastStep)
		perStep, r2, span, pattern := "-", "-", "-", "-"
		if g := s.Growth; g != nil {
			pattern = fmt.Sprintf("every step, %d..%d", g.FirstStep, g.LastStep)
			if g.Period > 1 {
				pattern = fmt.Sprintf("%s every %d steps, %d..%d", memtimeline.FormatBytes(g.JumpBytes), g.Period, g.FirstStep, g.LastStep)
			}
			if g.Bounded {
				pattern += fmt.Sprintf(", then flat %d steps", g.FlatAfter)
			}
		}
		if s.Allocated.FitSteps >= 2 {
			perStep = signed(s.BytesPerStep)
			r2 = fmt.Sprintf("%.3f", s.Allocated.R2)
			span = memtimeline.FormatBytes(s.Allocated.FirstBytes) + " → " + memtimeline.FormatBytes(s.Allocated.LastBytes)
		}
		resPerStep, resPeak := "-", "-"
		if s.Reserved != nil && s.Reserved.FitSteps >= 2 {
			resPerStep = signed(int64(s.Reserved.SlopeBytesPerStep))
		}
		if s.PeakReservedBytes >= 0 {
			resPeak = fmt.Sprintf("%s (%d)", memtimeline.FormatBytes(s.PeakReservedBytes), s.PeakReservedStep)
		}
		t.AppendRow(table.Row{dev, steps, stepsWord(s.Verdict), perStep, pattern, r2, span,
			fmt.Sprintf("%s (%d)", memtimeline.FormatBytes(s.PeakAllocatedBytes), s.PeakAllocatedStep), resPerStep, resPeak})
	}
	fmt.Fprintln(w, t.Render())
}

type stepsTrendJSON struct {
	FitSteps          int      `json:"fit_steps"`
	SlopeBytesPerStep float64  `json:"slope_bytes_per_step"`
	R2                float64  `json:"r2"`
	BytesPerSecond    *float64 `json:"bytes_per_second"`
	FirstBytes        int64    `json:"first_bytes"`
	LastBytes         int64    `json:"last_bytes"`
	GrowthBytes       int64    `json:"growth_bytes"`
}

type stepsSeriesJSON struct {
	Device             string          `json:"device"`
	Records            int             `json:"records"`
	FirstStep          int64           `json:"first_step"`
	LastStep           int64           `json:"last_step"`
	SkippedWarmup      int             `json:"skipped_warmup_steps"`
	Verdict            string          `json:"verdict"`
	BytesPerStep       int64           `json:"bytes_per_step"`
	Reason             string          `json:"reason"`
	Growth             *steplog.Growth `json:"growth"`
	Allocated          stepsTrendJSON  `json:"allocated"`
	Reserved           *stepsTrendJSON `json:"reserved"`
	PeakAllocatedBytes int64           `json:"peak_allocated_bytes"`
	PeakAllocatedStep  int64           `json:"peak_allocated_step"`
	PeakReservedBytes  *int64          `json:"peak_reserved_bytes"`
	PeakReservedStep   *int64          `json:"peak_reserved_step"`
	MaxAllocatedBytes  *int64          `json:"max_allocated_bytes_logged"`
}

type stepsReportJSON struct {
	File     string            `json:"file"`
	Records  int               `json:"records"`
	Keys     map[string]string `json:"keys"`
	Warnings []string          `json:"warnings"`
	Options  map[string]any    `json:"options"`
	Series   []stepsSeriesJSON `json:"series"`
}

func stepsTrend(t steplog.Trend) stepsTrendJSON {
	j := stepsTrendJSON{FitSteps: t.FitSteps, SlopeBytesPerStep: smiRound(t.SlopeBytesPerStep, 1), R2: smiRound(t.R2, 4),
		FirstBytes: t.FirstBytes, LastBytes: t.LastBytes, GrowthBytes: t.GrowthBytes}
	if t.HasTime {
		v := smiRound(t.BytesPerSecond, 0)
		j.BytesPerSecond = &v
	}
	return j
}

func stepsJSONReport(path string, log *steplog.Log, a steplog.Analysis) stepsReportJSON {
	o := a.Options
	rep := stepsReportJSON{File: path, Records: log.Lines, Keys: log.Keys, Warnings: log.Warnings,
		Options: map[string]any{"warmup_steps": o.WarmupSteps, "min_fit_steps": o.MinFitSteps,
			"growth_model": growthParams()},
		Series: []stepsSeriesJSON{}}
	if rep.Warnings == nil {
		rep.Warnings = []string{}
	}
	for _, s := range a.Series {
		j := stepsSeriesJSON{Device: s.Device, Records: s.Records, FirstStep: s.FirstStep, LastStep: s.LastStep,
			SkippedWarmup: s.SkippedWarmup, Verdict: s.Verdict, BytesPerStep: s.BytesPerStep, Reason: s.Reason, Growth: s.Growth,
			Allocated: stepsTrend(s.Allocated), PeakAllocatedBytes: s.PeakAllocatedBytes, PeakAllocatedStep: s.PeakAllocatedStep,
			MaxAllocatedBytes: smiOptBytes(s.MaxAllocatedBytes)}
		if s.Reserved != nil {
			r := stepsTrend(*s.Reserved)
			j.Reserved = &r
		}
		if s.PeakReservedBytes >= 0 {
			b, st := s.PeakReservedBytes, s.PeakReservedStep
			j.PeakReservedBytes, j.PeakReservedStep = &b, &st
		}
		rep.Series = append(rep.Series, j)
	}
	return rep
}

// growthParams are the growth model's constants, for the JSON report.
func growthParams() map[string]any {
	p := growth.Default()
	return map[string]any{"z_crit": p.ZCrit, "jump_sigmas": p.JumpK, "min_trend_steps": p.MinSteps, "min_jumps": p.MinJumps,
		"plateau_min_steps": p.PlateauMin, "plateau_sigmas": p.PlateauC, "sigma_floor_bytes": p.SigmaFloor}
}
