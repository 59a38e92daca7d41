package rules

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/growth"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/leak"
)

// Sources are weighed on one measure: the steps each one covers (a step
// log's records, a trace's profiled window, the steps an allocator
// history annotates), never the length of the leak one of them found. The
// source covering the most steps gives the figure. A source overrules
// another only with positive evidence: one that covers more steps than
// the leaking one, past the leak's last step, and measured that memory
// stopped growing (a step log's measured plateau after a fill: a queue or
// cache that filled up; or flat over the whole log) overrules it, and the
// verdict says both. A log the growth model finds inconclusive (too
// short, rises at random, a noisy tail) overrules nothing; a log with a
// significant trend agrees with a window that sees the same line.

// logVerdict turns a step log's (or memory_summary() log's) growth-model
// verdict into leak evidence: growth with its start, period and jump; a
// clean verdict with evidence (a measured plateau after a fill, or flat
// over the whole log), which is sustained and may overrule a shorter
// window; or unknown (the model is inconclusive), which overrules nothing.
func logVerdict(e *LeakEvidence, s steplog.SeriesReport) {
	switch s.Verdict {
	case steplog.VerdictGrowing:
		e.Verdict, e.BytesPerStep = leak.VerdictLeak, s.BytesPerStep
		if g := s.Growth; g != nil {
			e.GrowthFirst, e.GrowthLast, e.Period, e.JumpBytes = g.FirstStep, g.LastStep, g.Period, g.JumpBytes
		}
	case steplog.VerdictFlat:
		e.Verdict = leak.VerdictClean
		e.Sustained = s.Model == growth.Plateau || s.Model == growth.Flat
		e.Plateau = s.Model == growth.Plateau
	default:
		e.Verdict = leak.VerdictUnknown
	}
}

// overrules returns the clean evidence that outweighs the best leak
// evidence b: it covers more steps than b, reaches past the last step b
// saw growing and its own verdict is sustained. nil: none does.
func overrules(b LeakEvidence, cleans []LeakEvidence) *LeakEvidence {
	last := b.LastStep
	if b.GrowthLast > 0 || b.GrowthFirst > 0 {
		last = b.GrowthLast
	}
	var over *LeakEvidence
	for i := range cleans {
		c := &cleans[i]
		if !c.Sustained || c.Kind == SourceSMI || c.Steps <= b.Steps || c.LastStep <= last {
			continue
		}
		if over == nil || c.Steps > over.Steps {
			over = c
		}
	}
	return over
}

// overruled is the answer when a longer clean source outweighs the leaking
// ones: clean, with the disagreement said.
func overruled(ans *LeakAnswer, k kindCount, over LeakEvidence, leaks []LeakEvidence) {
	ans.Verdict, ans.Reason = leak.VerdictClean, over.Reason
	ans.From, ans.FromFile = k.from(over)+": it covers more steps than "+k.figures(leaks)+" and outweighs them", over.Source
	b := leaks[0]
	shows := "shows no sustained growth"
	if over.Plateau {
		shows = "measured a plateau after the growth (positive evidence that it stopped)"
	}
	ans.Agreement = fmt.Sprintf("differ: %s keeps %s per step over steps %d..%d, but %s covers %d steps (%d..%d) and %s",
		k.name(b), memtimeline.FormatBytes(b.BytesPerStep), growthFirst(b), growthLast(b), k.name(over), over.Steps, over.FirstStep, over.LastStep, shows)
	ans.Settle = "the window keeps memory while it grows but the run levels off: a bounded queue or a cache that filled up; if it should not grow even that far, bound it sooner (deque(maxlen=...)) or profile a later window (a later wait= in the schedule)"
}

func growthFirst(e LeakEvidence) int64 {
	if e.GrowthFirst > 0 || e.GrowthLast > 0 {
		return e.GrowthFirst
	}
	return e.FirstStep
}

func growthLast(e LeakEvidence) int64 {
	if e.GrowthFirst > 0 || e.GrowthLast > 0 {
		return e.GrowthLast
	}
	return e.LastStep
}

// traceLine keeps only the function of a trace's holding frame: a trace
// names a Python frame by its function's def line, or, for a frame that
// was already running when profiling began (preProfiled), by the line it
// was on at that moment (the loop's tm.step()); never by the line that
// allocated. Line 0 means "not recorded"; DefLine keeps the def line when
// that is what the number is; the note says what gives the line.
func traceLine(e *LeakEvidence, preProfiled bool) {
	l := e.Location.FromTrace(preProfiled)
	e.Location = l
	why := fmt.Sprintf("a trace names %s by its def line", l.Function)
	if preProfiled {
		why = fmt.Sprintf("%s was already running when profiling began, and a trace names it by the line it was on at that moment", l.Function)
	}
	e.StackNote = fmt.Sprintf("the trace does not record the allocating line: %s; the run's allocator snapshot (the snippet records it by default) gives the exact line", why)
}

// overruledLeakFindings turns the leak findings of a run whose verdict a
// longer clean source overruled (overruled) into notes that say so: the
// verdict is CLEAN, so a finding from the shorter window must not fail the
// gate on its own (a bounded queue filling up inside the profiled window
// would otherwise read CLEAN and FAIL at once). The finding stays, for
// what the window saw.
func overruledLeakFindings(vs []Verdict, fs []Finding) []Finding {
	for _, v := range vs {
		l := v.Leak
		if l.Verdict != leak.VerdictClean || l.Agreement == "" {
			continue
		}
		mine := map[string]bool{}
		for _, s := range v.Sources {
			mine[s] = true
		}
		for i := range fs {
			f := &fs[i]
			if !IsLeakRule(f.Rule) || !mine[f.Source] || f.Severity == Info {
				continue
			}
			f.Severity = Info
			f.Title = "Overruled: " + f.Title
			f.Detail = strings.TrimSpace(f.Detail + " The run's verdict is CLEAN: " + l.Agreement + ".")
			if l.Settle != "" {
				f.Advice = strings.ToUpper(l.Settle[:1]) + l.Settle[1:] + "."
			}
		}
	}
	return fs
}
