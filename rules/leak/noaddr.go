package leak

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/growth"
)

// StepSum is one point of a trace's step series: the allocated bytes
// of one GPU at the end of one profiled step.
type StepSum struct {
	Device int    `json:"device"`
	Step   int64  `json:"step"`
	Bytes  int64  `json:"allocated_bytes"`
	Name   string `json:"name"`
}

// NoAddrNote says what a trace without Addr cannot tell of a leak.
const NoAddrNote = "the trace records no Addr (torch before 1.10): which line keeps the memory is not recorded; a trace from torch 1.10 or later, or an allocator snapshot, gives it"

// StepSeries is what the verdict of a trace without Addr read: the
// allocated bytes at each step's end, per GPU, and, for a leak, the steps
// its growth covers (the first GPU that grows).
type StepSeries struct {
	Points []StepSum `json:"points"`
	// GrowthFirst..GrowthLast are the steps the growth covers, Period the
	// steps between a staircase's jumps (1: every step); -1 and 0 when
	// nothing grows.
	GrowthFirst int64 `json:"growth_first_step"`
	GrowthLast  int64 `json:"growth_last_step"`
	Period      int64 `json:"period_steps"`
}

// StepEnds returns, per GPU of the trace (device -1: all), the allocated
// bytes at the end of each profiled step: the allocator's Total Allocated
// of the device's last [memory] event at or before the step's end, or,
// where the trace records no totals (torch 1.8/1.9), the running sum of
// Bytes from the window's start (chrometrace derives it). A step before
// the device's first event has 0 B since the window's start. The series
// is what a steps log records after every step, relative to the window's
// start where the totals are derived.
func StepEnds(t *chrometrace.Trace, device int) [][]StepSum {
	steps := slices.Clone(t.Steps)
	slices.SortFunc(steps, func(a, b chrometrace.Step) int { return cmp.Compare(a.Start, b.Start) })
	steps = slices.CompactFunc(steps, func(a, b chrometrace.Step) bool { return a.Number == b.Number })
	var out [][]StepSum
	for _, d := range memtimeline.TraceTimelines(t) {
		if device >= 0 && d.Device != device {
			continue
		}
		a := d.Allocated
		var ser []StepSum
		for _, s := range steps {
			// The last event at or before the step's end.
			j, found := slices.BinarySearch(a.T, s.End()+1)
			_ = found
			v := int64(0)
			if j > 0 {
				v = a.V[j-1]
			} else if !t.MemorySchema.DerivedAllocated {
				continue // the allocator's total before its first event is not recorded
			}
			ser = append(ser, StepSum{Device: d.Device, Step: s.Number, Bytes: v, Name: fmt.Sprintf("ProfilerStep#%d", s.Number)})
		}
		if len(ser) > 0 {
			out = append(out, ser)
		}
	}
	return out
}

// analyzeWithoutAddr judges a trace whose [memory] events record no Addr
// (torch before 1.10): no block can be followed from one step to the
// next, but the allocated bytes at each step's end are a step series
// like a steps log's, and the growth model (memtimeline/growth) reads
// it. Which line keeps the memory is not recorded.
func analyzeWithoutAddr(t *chrometrace.Trace, opts Options, rep Report) Report {
	noAddr := fmt.Sprintf("%d GPU memory events record no Addr (torch before 1.10): which blocks stay alive, and which line keeps them, is not recorded", t.MemorySchema.WithoutAddr)
	what := "allocated bytes at each profiled step's end"
	if t.MemorySchema.DerivedAllocated {
		what = "allocated bytes at each profiled step's end (the running sum of the events' Bytes from the window's start)"
	}
	series := StepEnds(t, opts.Device)
	if len(series) == 0 {
		rep.Verdict = VerdictUnknown
		rep.Reason = noAddr + "; the trace has no ProfilerStep to read a series over: profile with a schedule and prof.step() every step, or log torch.cuda.memory_stats() after every step (the snippet's steps.jsonl)"
		return rep
	}
	p := growth.Default()
	rep.StepSeries = &StepSeries{GrowthFirst: -1, GrowthLast: -1}
	var leaking, clean, unknown []string
	var perStep int64
	for _, ser := range series {
		steps := make([]int64, len(ser))
		vals := make([]float64, len(ser))
		for i, s := range ser {
			steps[i], vals[i] = s.Step, float64(s.Bytes)
		}
		res := growth.Analyze(steps, vals, p)
		label := fmt.Sprintf("GPU %d: ", ser[0].Device)
		if len(series) == 1 {
			label = ""
		}
		desc := label + res.Describe(what)
		switch res.Verdict {
		case growth.Growth:
			perStep += int64(math.Round(res.BytesPerStep))
			if len(leaking) == 0 {
				rep.StepSeries.GrowthFirst, rep.StepSeries.GrowthLast, rep.StepSeries.Period = res.Start, res.End, 1
				if res.Staircase {
					rep.StepSeries.Period = res.Period
				}
			}
			leaking = append(leaking, desc)
		case growth.Plateau, growth.Flat:
			clean = append(clean, desc)
		default:
			if res.Points < p.MinSteps {
				desc = fmt.Sprintf("%sonly %d steps profiled (ProfilerStep#%d..#%d): too few to tell growth from the step series; profile %d steps or more (schedule active=%d)",
					label, len(ser), ser[0].Step, ser[len(ser)-1].Step, p.MinSteps, p.MinSteps)
			}
			unknown = append(unknown, desc)
		}
		rep.StepSeries.Points = append(rep.StepSeries.Points, ser...)
	}
	switch {
	case len(leaking) > 0:
		rep.Verdict, rep.GrowthBytesPerStep = VerdictLeak, perStep
		rep.Reason = strings.Join(leaking, "; ") + "; " + noAddr + ": profile with torch 1.10 or later for the line"
	case len(unknown) > 0:
		rep.Verdict = VerdictUnknown
		rep.Reason = strings.Join(unknown, "; ") + "; " + noAddr
	default:
		rep.Verdict = VerdictClean
		rep.Reason = strings.Join(clean, "; ") + "; " + noAddr
	}
	return rep
}

// StepsCovered is the steps a report read: its step table's, or, for a
// trace without Addr, its step series'.
func (r *Report) StepsCovered() (n int, first, last int64) {
	first, last = -1, -1
	add := func(s int64) {
		if n == 0 || s < first {
			first = s
		}
		if n == 0 || s > last {
			last = s
		}
		n++
	}
	for _, s := range r.Steps {
		add(s.Number)
	}
	if n == 0 && r.StepSeries != nil {
		seen := map[int64]bool{}
		for _, s := range r.StepSeries.Points {
			if !seen[s.Step] {
				seen[s.Step] = true
				add(s.Step)
			}
		}
	}
	return n, first, last
}
