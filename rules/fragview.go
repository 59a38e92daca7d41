package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/frag"
)

// withFrag is the rule set with the fragmentation analysis' options in
// force: its thresholds become the frag rules' thresholds (so that the
// verdict, the findings and the checklist use them), the rest (device,
// small block size, stack depth, sites kept, the flood's share, the gap's
// bytes) how the verdict is measured and judged.
func (s RuleSet) withFrag(o frag.Options) RuleSet {
	s.Rules = slices.Clone(s.Rules)
	for i := range s.Rules {
		switch s.Rules[i].ID {
		case frag.SmallAllocFlood:
			s.Rules[i].Threshold = o.MinSmallPerStep
		case frag.ReservedGap:
			s.Rules[i].Threshold = o.MinGapFraction
		case frag.CudaMallocChurn:
			s.Rules[i].Threshold = o.MinChurnPerStep
		}
	}
	s.fragOptions = &o
	return s
}

// fragMeasure is o with the judging thresholds at their defaults: the
// analysis measures by device, small block size, depth and sites kept
// only, so every set of thresholds shares one memoized analysis and
// Rejudge applies them.
func fragMeasure(o frag.Options) frag.Options {
	d := frag.DefaultOptions()
	d.Device, d.SmallMaxBytes, d.Depth = o.Device, o.SmallMaxBytes, o.Depth
	if o.TopSites <= 0 || o.TopSites > d.TopSites {
		d.TopSites = o.TopSites // fewer sites are the default's first ones
	}
	return d
}

// fragJudged is a trace's fragmentation report judged with the
// thresholds in force: the one judgment behind the verdict.
func fragJudged(in *Input, o frag.Options) frag.Report {
	f := in.fragWith(fragMeasure(o))
	if f.Verdict != frag.VerdictUnknown {
		f.Rejudge(o) // a copy: the memo keeps the measurements
	}
	return f
}

// fragReport is the trace's fragmentation analysis as this evaluation
// judged it (the thresholds and options in force): the tables behind
// its fragmentation verdict.
func (ev *Evaluation) fragReport(in *Input) frag.Report {
	o := ev.RuleSet.JudgeOptions().Frag
	f := fragJudged(in, o)
	if n := o.TopSites; n > 0 {
		f.SmallAllocs.TopSites = f.SmallAllocs.TopSites[:min(n, len(f.SmallAllocs.TopSites))]
		f.SegmentCalls.TopSites = f.SegmentCalls.TopSites[:min(n, len(f.SegmentCalls.TopSites))]
	}
	return f
}

// snapshotFrag is what a snapshot's fragmentation verdict was judged
// from: the snapshot's report and its pools and streams, most split first.
func (ev *Evaluation) snapshotFrag(in *Input) (*snapshot.Report, []frag.SnapshotPool) {
	rep := in.SnapshotReport()
	return rep, frag.SnapshotPools(rep)
}

// FragOf is the fragmentation answer of the run or rank the input is in
// (nil when nothing could judge it).
func (ev *Evaluation) FragOf(in *Input) *FragAnswer {
	for i := range ev.Verdicts {
		if slices.Contains(ev.Verdicts[i].Inputs, in) {
			return ev.Verdicts[i].Frag
		}
	}
	return nil
}

// summaryFrag judges memory_summary() tables: non-releasable memory is
// free space inside blocks that empty_cache cannot return (a snapshot's
// inactive split, judged by the same limit), and cudaMalloc retries
// during the log mean the allocator had to free its cache and try again.
// Nil without tables.
func memSummaryFrag(in *Input, limit float64) *FragAnswer {
	if !in.Has(SourceMemSummary) {
		return nil
	}
	devs := in.MemSummary.Frag()
	if len(devs) == 0 {
		return nil
	}
	a := &FragAnswer{Source: in.Source, Verdict: frag.VerdictOK, Reason: "little memory is non-releasable and cudaMalloc never retried",
		Wasted: "non-releasable at its peak: free inside blocks empty_cache cannot return (memory_summary)"}
	var why []string
	for _, d := range devs {
		name := fmt.Sprintf("device %d", d.Device)
		if d.Rank >= 0 {
			name = fmt.Sprintf("rank %d device %d", d.Rank, d.Device)
		}
		a.WastedBytes = max(a.WastedBytes, d.NonReleasablePeakBytes)
		if d.NonReleasableFraction > limit {
			why = append(why, fmt.Sprintf("%s: non-releasable memory reached %.0f%% of reserved (over %.0f%%; table at line %d)", name, 100*d.NonReleasableFraction, 100*limit, d.MaxNonReleasableLine))
		}
		if d.RetriesDuringLog > 0 {
			why = append(why, fmt.Sprintf("%s: cudaMalloc retried %d times during the log (the allocator freed its cache to satisfy a request)", name, d.RetriesDuringLog))
		}
	}
	if len(why) > 0 {
		a.Verdict, a.Reason = frag.VerdictFragmented, strings.Join(why, "; ")
	}
	return a
}

// Fragmented reports whether a run's fragmentation verdict is FRAGMENTED
// (frag's gate: the frag rules themselves warn by default).
func (ev *Evaluation) Fragmented() bool {
	for _, v := range ev.Verdicts {
		if v.Frag != nil && v.Frag.Verdict == frag.VerdictFragmented {
			return true
		}
	}
	return false
}
