package steplog

import (
	"math"

	"github.com/torchmem/torchmem/memtimeline/growth"
)

// The step-log verdict is the growth model's (memtimeline/growth, the one
// model of a step series; the snippet's LeakWatch follows it too), read on
// requested_bytes.all.current when every record has it (what the caller
// asked for, without the allocator's rounding: far less noise) and on
// allocated bytes otherwise.

// Growth is the model's figures for a series that grew: still growing at
// the end of the log (a leak), or bounded (it grew, then stayed flat).
type Growth struct {
	// Value is the quantity the model read: "requested" or "allocated".
	Value string `json:"value"`
	// BytesPerStep is the growth per step: the Theil-Sen slope from
	// FirstStep on, or JumpBytes / Period for a staircase.
	BytesPerStep int64 `json:"bytes_per_step"`
	// FirstStep is the step the growth starts at (the change point of a
	// late leak, or a staircase's first jump); LastStep the last step it
	// covers.
	FirstStep int64 `json:"first_step"`
	LastStep  int64 `json:"last_step"`
	// Period is the steps between a staircase's jumps (1: a trend, or a
	// jump every step); Jumps how many, JumpBytes their mean.
	Period    int64 `json:"period_steps"`
	Jumps     int   `json:"jumps,omitempty"`
	JumpBytes int64 `json:"jump_bytes,omitempty"`
	// Accelerating: the later steps keep clearly more than the earlier.
	Accelerating bool `json:"accelerating,omitempty"`
	// Bounded: a measured plateau followed the growth: FillBytes rose by
	// LastStep, then FlatAfter steps stayed flat to the end of the log.
	Bounded   bool  `json:"bounded,omitempty"`
	FillBytes int64 `json:"fill_bytes,omitempty"`
	FlatAfter int   `json:"flat_after,omitempty"`
	// SigmaBytes is the step noise (1.4826 * MAD of the step-to-step
	// changes); Z the Mann-Kendall score of the trend (0 for a staircase).
	SigmaBytes int64   `json:"sigma_bytes"`
	Z          float64 `json:"z,omitempty"`
}

// modelSeries picks the values the model reads: requested bytes when
// every record has them, else allocated bytes.
func modelSeries(recs []Record) (steps []int64, vals []float64, value string) {
	value = "requested"
	for _, r := range recs {
		if r.RequestedBytes <= 0 {
			value = "allocated"
			break
		}
	}
	for _, r := range recs {
		v := r.AllocatedBytes
		if value == "requested" {
			v = r.RequestedBytes
		}
		if v >= 0 {
			steps, vals = append(steps, r.Step), append(vals, float64(v))
		}
	}
	return steps, vals, value
}

// judge runs the model over recs and sets the report's verdict, growth
// and reason.
func judge(rep *SeriesReport, recs []Record) {
	steps, vals, value := modelSeries(recs)
	res := growth.Analyze(steps, vals, growth.Default())
	rep.Model = res.Verdict
	what := value + " bytes"
	rep.Reason = res.Describe(what)
	g := growthOf(res, value)
	switch res.Verdict {
	case growth.Growth:
		rep.Verdict, rep.Growth, rep.BytesPerStep = VerdictGrowing, g, g.BytesPerStep
	case growth.Plateau:
		rep.Verdict, rep.Growth = VerdictFlat, g
	case growth.Flat:
		rep.Verdict = VerdictFlat
	default:
		rep.Verdict = VerdictUnknown
	}
}

// growthOf is the model's result as a Growth (value names what it read).
func growthOf(res growth.Result, value string) *Growth {
	g := &Growth{Value: value, BytesPerStep: int64(math.Round(res.BytesPerStep)), FirstStep: res.Start, LastStep: res.End,
		Period: 1, Accelerating: res.Accelerating, SigmaBytes: int64(math.Round(res.Sigma)), Z: finite(res.Z)}
	if res.Staircase {
		g.Period, g.Jumps, g.JumpBytes = res.Period, res.Jumps, int64(math.Round(res.Jump))
	}
	if res.Verdict == growth.Plateau {
		g.Bounded, g.FillBytes, g.FlatAfter = true, int64(math.Round(res.FillBytes)), res.PlateauSteps
		g.BytesPerStep = 0
	}
	return g
}

func finite(z float64) float64 {
	if math.IsInf(z, 0) || math.IsNaN(z) {
		return 0
	}
	return z
}
