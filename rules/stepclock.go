package rules

import (
	"math"

	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/leak"
)

// groupLeakEvidence is what an input of a run says about leaks, read with
// the other inputs of its run and rank: an allocator snapshot's history is
// cut into steps by the run's step log when the log's clock gives it more
// steps when the profiler annotated none (TORCHMEM_TRACE=0).
func groupLeakEvidence(in *Input, group []*Input) []LeakEvidence {
	if !in.Has(SourceSnapshot) {
		return in.LeakEvidence()
	}
	steps, ends, from := stepClock(in, group)
	if steps == nil {
		return in.LeakEvidence()
	}
	return Memo(in, "verdict:leak-evidence-clock:"+from, func() []LeakEvidence {
		rep := snapshot.Analyze(in.Snapshot.WithStepClock(steps, ends), 0)
		lr := leak.AnalyzeSnapshot(rep, leak.DefaultOptions())
		e := reportEvidence(in, SourceSnapshot, lr)
		e.Reason += " (the history cut into steps by the step log's clock: " + from + ")"
		return []LeakEvidence{e}
	})
}

// stepClock returns the step numbers and end times (epoch µs) of the
// group's timed step log, when the log has one series, at least 3 of its
// steps end inside the snapshot's recorded history and the history has no
// ProfilerStep annotations; nil otherwise.
func stepClock(in *Input, group []*Input) (steps, ends []int64, from string) {
	rep := in.SnapshotReport()
	if rep.TraceEndUS <= 0 {
		return nil, nil, ""
	}
	for _, g := range group {
		if g.StepLog == nil || len(g.StepLog.Series) != 1 {
			continue
		}
		var st, en []int64
		inside := 0
		for _, r := range g.StepLog.Series[0].Records {
			if !r.HasTime || r.Time <= 0 || r.Time > 1e12 {
				continue
			}
			us := int64(math.Round(r.Time * 1e6))
			if len(en) > 0 && us < en[len(en)-1] {
				continue // out of order: not a clock
			}
			st, en = append(st, r.Step), append(en, us)
			if us >= rep.TraceStartUS && us <= rep.TraceEndUS {
				inside++
			}
		}
		// Only a history the profiler annotated no step of: a clock from
		// another file cannot be read back from a digest of this one, and
		// the answer must not depend on which one is read.
		if len(rep.Steps) == 0 && inside >= leak.DefaultOptions().MinSteps {
			return st, en, g.Source
		}
	}
	return nil, nil, ""
}
