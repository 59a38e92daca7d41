package rules

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
)

// Holder is a line (or operator) holding memory at a moment.
type Holder struct {
	Where    string `json:"where"`
	Operator string `json:"operator,omitempty"`
	Bytes    int64  `json:"bytes"`
}

// PeakAnswer is the peak of allocated memory and what fills it.
type PeakAnswer struct {
	Source         string `json:"source"`
	AllocatedBytes int64  `json:"allocated_bytes"`
	// Step is the ProfilerStep (or logged step) the peak falls in.
	Step string `json:"step,omitempty"`
	// TNs is the peak's time on the trace's clock (traces only).
	TNs     int64    `json:"t_ns,omitempty"`
	Holders []Holder `json:"holders"`
	// Composition splits the peak by line, operator and category.
	Composition *memtimeline.Composition `json:"composition,omitempty"`
	// TorchSource is the export_memory_timeline file whose categories
	// Composition.Torch holds.
	TorchSource string `json:"torch_categories_from,omitempty"`
	// RelativeToWindowStart: the trace records no allocator totals (torch
	// < 1.10), so AllocatedBytes is the running sum of the window's events,
	// not counting what was allocated before it.
	RelativeToWindowStart bool `json:"relative_to_window_start,omitempty"`
}

// judgePeak takes the highest allocated peak among the group's traces,
// with what held it; without a trace, a step log's peak.
func judgePeak(ins []*Input) *PeakAnswer {
	var ans *PeakAnswer
	for _, in := range ins {
		if !in.Is(SourceTrace) {
			continue
		}
		if in.IsDigest() {
			ans = higherDigestPeak(in, ans)
			continue
		}
		c := in.PeakComposition()
		if c == nil {
			continue
		}
		if ans != nil && ans.AllocatedBytes >= c.AllocatedBytes {
			continue
		}
		ans = &PeakAnswer{Source: in.Source, AllocatedBytes: c.AllocatedBytes, Step: c.Step, TNs: c.TNs, Composition: c, Holders: []Holder{},
			RelativeToWindowStart: in.Trace.MemorySchema.DerivedAllocated}
		ans.Holders = topHolders(c)
	}
	if ans != nil {
		// Torch's own categories, when the run exported its memory
		// timeline: measured, not estimated.
		var base int64
		for _, in := range ins {
			switch {
			case in.Source != ans.Source:
			case in.Has(SourceTrace):
				base = in.Trace.Meta.BaseTimeNanoseconds
			case in.IsDigest():
				base = in.Digest.TraceBaseNs
			}
		}
		for _, in := range ins {
			if in.Timeline == nil || base <= 0 {
				continue
			}
			c := *ans.Composition
			if c.CompareWithTorch(in.Timeline.SplitAt(c.TNs + base)) {
				ans.Composition = &c
				ans.TorchSource = in.Source
				break
			}
		}
		// The run's peak is torch's own (allocated_bytes.all.peak) when a
		// step log of the run records a higher one than the profiled
		// window's: the same figure steps gives. The holders stay the
		// window's (Composition says when).
		return withLoggedPeak(ans, ins)
	}
	// Without a trace, an allocator snapshot's history names the lines
	// alive at its highest point.
	for _, in := range ins {
		if !in.Has(SourceSnapshot) {
			continue
		}
		c := Memo(in, "verdict:snapshot-peak", func() *memtimeline.Composition { return snapshot.PeakComposition(in.Snapshot) })
		if c == nil || (ans != nil && ans.AllocatedBytes >= c.AllocatedBytes) {
			continue
		}
		ans = &PeakAnswer{Source: in.Source, AllocatedBytes: c.AllocatedBytes, TNs: c.TNs, Composition: c, Holders: topHolders(c)}
	}
	if ans != nil {
		return withLoggedPeak(ans, ins)
	}
	// Without a trace, torch's own timeline knows the peak and its
	// categories (tensors only).
	for _, in := range ins {
		tl := in.Timeline
		if tl == nil {
			continue
		}
		i, peak, ok := tl.Peak()
		if !ok {
			continue
		}
		split := tl.SplitAt(tl.Times[i])
		ans = &PeakAnswer{Source: in.Source, AllocatedBytes: peak, Holders: []Holder{}, TorchSource: in.Source,
			Composition: &memtimeline.Composition{TNs: tl.Times[i], Device: -1, AllocatedBytes: peak, SeenBytes: peak, Torch: split, Agreement: 0,
				ByLine: []memtimeline.Share{}, ByOperator: []memtimeline.Share{}, ByCategory: memtimeline.TorchAsComposition(split),
				Note: "torch's export_memory_timeline categories at its peak (tensors only: allocator blocks that are no tensor are not in it); no trace to name lines"}}
		return ans
	}
	return loggedPeak(ins)
}

// higherDigestPeak is the peak a digest (torchmem summarize's file) of
// in records when it is higher than ans, else ans.
func higherDigestPeak(in *Input, ans *PeakAnswer) *PeakAnswer {
	if p := in.Digest.Verdict.Peak; p != nil && (ans == nil || p.AllocatedBytes > ans.AllocatedBytes) {
		c := *p
		return &c
	}
	return ans
}

// withLoggedPeak is ans with the run's peak taken from a step log of the
// run (torch's allocated_bytes.all.peak) when it records a higher one than
// ans: the holders stay ans's.
func withLoggedPeak(ans *PeakAnswer, ins []*Input) *PeakAnswer {
	if logged := loggedPeak(ins); logged != nil && logged.AllocatedBytes > ans.AllocatedBytes {
		ans.Source, ans.AllocatedBytes, ans.Step = logged.Source, logged.AllocatedBytes, logged.Step
	}
	return ans
}

// loggedPeak is the highest peak the run's per-step logs record (torch's
// allocated_bytes.all.peak where logged), nil without a log.
func loggedPeak(ins []*Input) *PeakAnswer {
	var ans *PeakAnswer
	for _, in := range ins {
		if !in.hasSteps() {
			continue
		}
		if in.IsDigest() {
			ans = higherDigestPeak(in, ans)
			continue
		}
		for _, s := range in.StepAnalysis().Series {
			peak, step := s.PeakAllocatedBytes, fmt.Sprint(s.PeakAllocatedStep)
			if s.MaxAllocatedBytes > peak {
				peak, step = s.MaxAllocatedBytes, ""
			}
			if ans == nil || peak > ans.AllocatedBytes {
				ans = &PeakAnswer{Source: in.Source, AllocatedBytes: peak, Holders: []Holder{}}
				if step != "" {
					ans.Step = "step " + step
				}
			}
		}
	}
	return ans
}

// topHolders are the three lines holding the most of a composition.
func topHolders(c *memtimeline.Composition) []Holder {
	out := []Holder{}
	for _, h := range c.ByLine {
		if len(out) == 3 {
			break
		}
		if h.Name == memtimeline.BeforeProfiling {
			continue // no line: said by the categories
		}
		out = append(out, Holder{Where: h.Name, Operator: h.Detail, Bytes: h.Bytes})
	}
	return out
}

// PeakComposition is what fills the trace's peak of allocated memory
// (memoized; nil without GPU memory events).
func (in *Input) PeakComposition() *memtimeline.Composition {
	return Memo(in, "verdict:peak-composition", func() *memtimeline.Composition {
		if !in.Has(SourceTrace) {
			return nil
		}
		return memtimeline.PeakComposition(in.Trace, in.Attribution(), in.Lifetimes(-1), -1)
	})
}
