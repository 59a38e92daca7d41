package rules

import (
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/leak"
)

// The chain from a leak to an OOM, and the time a leak leaves before one.

// leakSpan is the leak's growth span and its step rate, from its best
// evidence: the first growing step, the last step seen, and the median
// seconds per step when the source has times (0 when not).
func leakSpan(l LeakAnswer, ins []*Input) (first, last int64, secPerStep float64) {
	first, last = -1, -1
	for _, e := range l.Evidence {
		if e.Verdict != leak.VerdictLeak {
			continue
		}
		first, last = e.FirstStep, e.LastStep
		if e.GrowthFirst > 0 || e.GrowthLast > 0 {
			first = e.GrowthFirst
			last = max(last, e.GrowthLast)
		}
		break
	}
	secPerStep = runStepFacts(ins).SecPerStep
	return first, last, secPerStep
}

// chainOOMs names the leak that filled the memory in every OOM that is
// not fragmentation, when the run leaks.
func chainOOMs(v *Verdict) {
	l := v.Leak
	if l.Verdict != leak.VerdictLeak || l.BytesPerStep <= 0 {
		return
	}
	first, last, _ := leakSpan(l, v.Inputs)
	for i := range v.OOMs {
		o := &v.OOMs[i]
		if o.Cause != OOMCapacity && o.Cause != OOMProcessLimit {
			continue
		}
		if o.CapacityBytes > 0 && o.RequestBytes > o.CapacityBytes {
			continue // no leak makes a request larger than the GPU fail
		}
		where := "the leak"
		if l.Location != nil {
			where += " at " + l.Location.String()
		}
		span := memtimeline.FormatBytes(l.BytesPerStep) + "/step"
		kept := int64(-1)
		if first >= 0 && last >= first {
			kept = l.BytesPerStep * (last - first + 1)
			span += fmt.Sprintf(" since step %d, %s by step %d", first, memtimeline.FormatBytes(kept), last)
		}
		limit := "the device's memory"
		switch {
		case o.Cause == OOMProcessLimit && o.ReservedBytes > 0:
			limit = fmt.Sprintf("the process's limit (%s reserved at the failure)", memtimeline.FormatBytes(o.ReservedBytes))
		case o.CapacityBytes > 0:
			limit = "the GPU's " + memtimeline.FormatBytes(o.CapacityBytes)
		}
		verb := "filled"
		if kept >= 0 && o.ReservedBytes > 0 && float64(kept) < 0.5*float64(o.ReservedBytes) {
			verb = "took part of"
		}
		o.FilledBy = fmt.Sprintf("%s (%s) %s %s", where, span, verb, limit)
	}
}

// Forecast is when a leak fills the memory the process may use.
type Forecast struct {
	// HeadroomBytes is what is left: the limit minus reserved at the
	// log's last step; LimitBytes the limit and how it is known (Limit).
	HeadroomBytes int64  `json:"headroom_bytes"`
	LimitBytes    int64  `json:"limit_bytes"`
	Limit         string `json:"limit"`
	// Steps is how many more steps at the leak's rate fill it; Seconds
	// that at the log's median step time (0 when the log has no times).
	Steps      int64   `json:"steps"`
	SecPerStep float64 `json:"seconds_per_step,omitempty"`
	Seconds    float64 `json:"seconds,omitempty"`
	Text       string  `json:"text"`
}

// forecast gives a leak verdict its time to OOM when the headroom is
// known; nil when it is not (or the run already ran out).
func forecast(v *Verdict) *Forecast {
	l := v.Leak
	if l.Verdict != leak.VerdictLeak || l.BytesPerStep <= 0 || len(v.OOMs) > 0 {
		return nil
	}
	f := runStepFacts(v.Inputs)
	limit, kind := processLimit(f, v.OOMs, v.Inputs)
	reserved := f.LastReserved
	if reserved < 0 {
		// Without a steps log: the snapshot's reserved at its dump, else
		// the trace's peak reserved.
		for _, in := range v.Inputs {
			if st := in.OOMFacts().SnapshotStats; st != nil {
				reserved = max(reserved, st.ReservedBytes)
			}
		}
	}
	if reserved < 0 {
		for _, in := range v.Inputs {
			var s *chrometrace.Summary
			switch {
			case in.IsDigest():
				s = in.Digest.Overview
			case in.Has(SourceTrace):
				ts := in.Overview(-1)
				s = &ts
			}
			if s != nil && !s.ReservedNotRecorded && s.PeakReservedBytes > 0 {
				reserved = max(reserved, s.PeakReservedBytes)
			}
		}
	}
	if limit <= 0 || reserved < 0 {
		return nil
	}
	fc := &Forecast{HeadroomBytes: max(0, limit-reserved), LimitBytes: limit}
	switch kind {
	case limitLogged:
		fc.Limit = "the process's limit (capacity x memory fraction)"
	case limitCapacity:
		fc.Limit = "the device's capacity (no memory fraction recorded: a lower one fills sooner)"
	default:
		return nil
	}
	fc.Steps = int64(math.Ceil(float64(fc.HeadroomBytes) / float64(l.BytesPerStep)))
	_, _, fc.SecPerStep = leakSpan(l, v.Inputs)
	profiled := ""
	if fc.SecPerStep == 0 {
		// No steps log with times: a trace's median ProfilerStep, which
		// the profiler slows (an upper bound of the time).
		for _, in := range v.Inputs {
			var ns int64
			switch {
			case in.IsDigest():
				ns = in.Digest.StepTimeNs
			case in.Has(SourceTrace):
				ns = medianStepNs(in.Trace)
			}
			if ns > 0 {
				fc.SecPerStep, profiled = float64(ns)/1e9, ", a profiled step"
				break
			}
		}
	}
	what := "the " + memtimeline.FormatBytes(limit) + " device"
	if kind == limitLogged {
		what = "the process's " + memtimeline.FormatBytes(limit) + " limit"
	}
	fc.Text = fmt.Sprintf("at %s/step, %s fills in ~%s steps", memtimeline.FormatBytes(l.BytesPerStep), what, groupThousands(fc.Steps))
	if fc.SecPerStep > 0 {
		fc.Seconds = float64(fc.Steps) * fc.SecPerStep
		fc.Text += fmt.Sprintf(" (~%s at %.2g s/step%s)", roughDuration(fc.Seconds), fc.SecPerStep, profiled)
	}
	at := "at the last logged step"
	if f.LastReserved < 0 {
		at = "recorded"
	}
	fc.Text += fmt.Sprintf(" (%s headroom after reserved %s %s", memtimeline.FormatBytes(fc.HeadroomBytes), memtimeline.FormatBytes(reserved), at)
	if kind == limitCapacity {
		fc.Text += "; the memory fraction is not recorded, a lower one fills sooner"
	}
	fc.Text += ")"
	return fc
}

// groupThousands writes n with thousands separators, rounded to two
// significant digits past 1,000 (a forecast, not a count).
func groupThousands(n int64) string {
	if n >= 1000 {
		p := math.Pow(10, math.Floor(math.Log10(float64(n)))-1)
		n = int64(math.Round(float64(n)/p) * p)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// roughDuration says seconds the way a forecast should: "~2.6 h".
func roughDuration(sec float64) string {
	return memtimeline.FormatDuration(time.Duration(sec * float64(time.Second)))
}

// oomRules report the same out-of-memory error from different files.
var oomRules = []string{"memory.oom", "snapshot.oom"}

// mergeOOMFindings turns a group's OOM findings (a trace's event and a
// snapshot's entry of the same error) into one finding carrying the
// verdict's cause and chain: one OOM is one error.
func mergeOOMFindings(vs []Verdict, fs []Finding) []Finding {
	groupOf := map[string]int{}
	for i, v := range vs {
		for _, s := range v.Sources {
			groupOf[s] = i
		}
	}
	per := map[int][]int{}
	for i, f := range fs {
		if f.Rule != oomRules[0] && f.Rule != oomRules[1] {
			continue
		}
		if g, ok := groupOf[f.Source]; ok {
			per[g] = append(per[g], i)
		}
	}
	drop := map[int]bool{}
	for g, idx := range per {
		v := vs[g]
		keep := idx[0]
		for _, i := range idx {
			if fs[i].Location != nil && fs[keep].Location == nil {
				keep = i
			}
		}
		for _, i := range idx {
			if i != keep {
				drop[i] = true
			}
		}
		if len(v.OOMs) == 0 {
			continue
		}
		o := v.OOMs[0]
		f := fs[keep]
		f.Title = fmt.Sprintf("Out of memory (%s): %s requested", o.Cause, memtimeline.FormatBytes(o.RequestBytes))
		f.Detail = o.Reason + "."
		if o.FilledBy != "" {
			f.Detail = "The chain: " + o.FilledBy + ". " + f.Detail
		}
		if len(v.OOMs) > 1 {
			f.Detail += fmt.Sprintf(" %d out-of-memory errors in all.", len(v.OOMs))
		}
		if len(idx) > 1 {
			f.Detail += fmt.Sprintf(" One error, seen in %d files.", len(idx))
		}
		if o.Location != nil && f.Location == nil {
			f.Location = o.Location
		}
		f.Metrics = maps.Clone(f.Metrics)
		if f.Metrics == nil {
			f.Metrics = map[string]float64{}
		}
		f.Metrics["oom_events"] = float64(len(v.OOMs))
		fs[keep] = f
	}
	out := make([]Finding, 0, len(fs))
	for i, f := range fs {
		if !drop[i] {
			out = append(out, f)
		}
	}
	return out
}
