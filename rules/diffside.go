package rules

import (
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/diff"
	"github.com/torchmem/torchmem/rules/site"
)

// NewTraceSide reduces a trace (device -1: all GPUs) for diffing.
func NewTraceSide(source string, t *chrometrace.Trace) *diff.Side {
	return NewInputSide(&Input{Source: source, Trace: t})
}

// NewInputSide reduces a trace input for diffing, sharing its analyses.
func NewInputSide(in *Input) *diff.Side {
	source := in.Source
	s := &diff.Side{Source: source, Operators: map[string]int64{}, SiteAlloc: map[string]int64{}, SiteLive: map[string]int64{}}
	sum := in.Overview(-1)
	s.PeakAllocatedBytes, s.PeakReservedBytes, s.Steps = sum.PeakAllocatedBytes, sum.PeakReservedBytes, sum.Steps
	leaks := in.Leaks()
	s.GrowthBytesPerStep, s.LeakVerdict, s.Suspects = leaks.GrowthBytesPerStep, leaks.Verdict, leaks.Suspects
	for _, st := range leaks.Steps {
		s.StepSurvivors = append(s.StepSurvivors, st.SurvivorBytes)
	}
	s.StepPeakAllocated = stepPeakAllocated(in.Trace)
	for _, op := range in.Operators() {
		if !op.OnDevice {
			s.Operators[op.Name] += op.SelfDeviceMemory
		}
	}
	for _, st := range in.Sites(memtimeline.SiteOptions{Device: -1}) {
		k := site.Label(st.Frames, st.Operator)
		if st.ForwardOp != "" {
			k += " (backward)"
		}
		s.SiteAlloc[k] += st.AllocBytes
		s.SiteLive[k] += st.LiveBytesAtEnd
	}
	return s
}

// RuleLeak is the leak rule's id; its threshold is the diff's leak gate.
const RuleLeak = "memory.leak"
