package steplog

import (
	"fmt"
	"math"

	"github.com/torchmem/torchmem/memtimeline/growth"
)

// Options tunes Analyze; DefaultOptions gives the command's
// defaults.
type Options struct {
	// WarmupSteps leading records are left out of the fit when at least
	// MinFitSteps remain: the first step creates optimizer state and
	// gradients, a one-off rise that is not a leak.
	WarmupSteps int
	MinFitSteps int
}

// DefaultOptions returns the defaults of `torchmem steps`.
func DefaultOptions() Options {
	return Options{WarmupSteps: 1, MinFitSteps: 3}
}

// Step verdicts.
const (
	VerdictGrowing = "growing"
	VerdictFlat    = "flat"
	// VerdictUnknown: too few steps, or the model is inconclusive.
	VerdictUnknown = "unknown"
)

// Analysis is Analyze's result, one report per device.
type Analysis struct {
	Options Options
	Series  []SeriesReport
}

// SeriesReport describes one device's memory over steps.
type SeriesReport struct {
	Device    string
	Records   int
	FirstStep int64
	LastStep  int64
	// SkippedWarmup is how many leading records the fits leave out.
	SkippedWarmup int

	Allocated Trend
	// Reserved is nil when the log has no reserved bytes.
	Reserved *Trend

	// PeakAllocatedBytes is torch's peak (allocated_bytes.all.peak, the
	// highest allocated at any moment, not only at the logged points) when
	// the log records it, else the highest logged allocated; its step is
	// the first line that shows it. The same for reserved.
	PeakAllocatedBytes int64
	PeakAllocatedStep  int64
	// PeakReservedBytes is -1 without reserved bytes.
	PeakReservedBytes int64
	PeakReservedStep  int64
	// MaxAllocatedBytes is the largest peak-allocated value the log itself
	// recorded (max_memory_allocated); -1 when it has none.
	MaxAllocatedBytes int64

	// Verdict is growing, flat or unknown, from the growth model
	// (growth.go), not from the fitted line; Model is the model's own
	// verdict (growth, plateau, flat or inconclusive: unknown).
	Verdict string
	Model   growth.Verdict
	// Growth is the growth found (nil: none); a Bounded one stopped and
	// leaves the verdict flat.
	Growth *Growth
	// BytesPerStep is the growth per step when growing, else the fitted
	// slope rounded to whole bytes.
	BytesPerStep int64
	Reason       string
}

// Trend is a least-squares line of bytes over step numbers.
type Trend struct {
	FitSteps          int
	SlopeBytesPerStep float64
	R2                float64
	// BytesPerSecond is the slope over the lines' timestamps, when
	// HasTime.
	BytesPerSecond float64
	HasTime        bool
	FirstBytes     int64
	LastBytes      int64
	GrowthBytes    int64
}

// Analyze fits allocated (and reserved) bytes over steps for every
// series of log and gives a verdict.
func Analyze(log *Log, opts Options) Analysis {
	a := Analysis{Options: opts}
	if log == nil {
		return a
	}
	for _, s := range log.Series {
		a.Series = append(a.Series, analyzeStepSeries(s, opts))
	}
	return a
}

func analyzeStepSeries(s *Series, opts Options) SeriesReport {
	rep := SeriesReport{Device: s.Device, Records: len(s.Records), PeakReservedBytes: -1, MaxAllocatedBytes: -1, Verdict: VerdictUnknown}
	recs := s.Records
	if len(recs) == 0 {
		rep.Reason = "no records"
		return rep
	}
	rep.FirstStep, rep.LastStep = recs[0].Step, recs[len(recs)-1].Step
	rep.PeakAllocatedBytes = -1
	hasReserved := false
	for _, r := range recs {
		if r.AllocatedBytes > rep.PeakAllocatedBytes {
			rep.PeakAllocatedBytes, rep.PeakAllocatedStep = r.AllocatedBytes, r.Step
		}
		if r.ReservedBytes > rep.PeakReservedBytes {
			rep.PeakReservedBytes, rep.PeakReservedStep = r.ReservedBytes, r.Step
		}
		hasReserved = hasReserved || r.ReservedBytes >= 0
		rep.MaxAllocatedBytes = max(rep.MaxAllocatedBytes, r.PeakAllocatedBytes)
	}
	// torch's own peaks, where logged: what happened between the lines.
	for _, r := range recs {
		if r.PeakAllocatedBytes > rep.PeakAllocatedBytes {
			rep.PeakAllocatedBytes, rep.PeakAllocatedStep = r.PeakAllocatedBytes, r.Step
		}
		if r.PeakReservedBytes > rep.PeakReservedBytes {
			rep.PeakReservedBytes, rep.PeakReservedStep = r.PeakReservedBytes, r.Step
		}
	}
	if len(recs)-opts.WarmupSteps >= opts.MinFitSteps {
		rep.SkippedWarmup = max(opts.WarmupSteps, 0)
	}
	fitRecs := recs[rep.SkippedWarmup:]
	rep.Allocated = fitStepTrend(fitRecs, func(r Record) int64 { return r.AllocatedBytes })
	if hasReserved {
		t := fitStepTrend(fitRecs, func(r Record) int64 { return r.ReservedBytes })
		rep.Reserved = &t
	}
	tr := rep.Allocated
	rep.BytesPerStep = int64(math.Round(tr.SlopeBytesPerStep))
	if tr.FitSteps < opts.MinFitSteps {
		rep.Reason = fmt.Sprintf("%d steps to fit, need %d", tr.FitSteps, opts.MinFitSteps)
		return rep
	}
	// The verdict is the growth model's (growth.go), not the fitted
	// line: the line stays for the table only.
	judge(&rep, fitRecs)
	return rep
}

// fitStepTrend fits value(r) over r.Step, skipping records where the value
// is missing (-1). Sums are taken about the first point to keep float64
// exact for byte counts in the hundreds of GiB.
func fitStepTrend(recs []Record, value func(Record) int64) Trend {
	t := Trend{FirstBytes: -1, LastBytes: -1}
	var xs, ys, ts []float64
	var x0 int64
	var y0 int64
	timed := true
	for _, r := range recs {
		v := value(r)
		if v < 0 {
			continue
		}
		if len(xs) == 0 {
			x0, y0 = r.Step, v
			t.FirstBytes = v
		}
		t.LastBytes = v
		xs = append(xs, float64(r.Step-x0))
		ys = append(ys, float64(v-y0))
		ts = append(ts, r.Time)
		timed = timed && r.HasTime
	}
	t.FitSteps = len(xs)
	if len(xs) == 0 {
		return t
	}
	t.GrowthBytes = t.LastBytes - t.FirstBytes
	t.SlopeBytesPerStep, t.R2 = leastSquares(xs, ys)
	if timed && len(ts) >= 2 {
		t0 := ts[0]
		rel := make([]float64, len(ts))
		for i := range ts {
			rel[i] = ts[i] - t0
		}
		t.BytesPerSecond, _ = leastSquares(rel, ys)
		t.HasTime = true
	}
	return t
}

// leastSquares returns the slope and R^2 of y over x; both 0 when x or y
// does not vary (no trend can be measured, or there is none).
func leastSquares(xs, ys []float64) (slope, r2 float64) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= n
	my /= n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return 0, 0
	}
	slope = sxy / sxx
	if syy == 0 {
		return slope, 0
	}
	return slope, min(sxy*sxy/(sxx*syy), 1)
}
