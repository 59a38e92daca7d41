package rules

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// LeakEvidence is what one input says about growth step over step.
type LeakEvidence struct {
	Source string     `json:"source"` // the file
	Kind   SourceKind `json:"input"`  // SourceSteps, SourceTrace, ...
	// Verdict is leak.VerdictLeak, leak.VerdictClean or leak.VerdictUnknown.
	Verdict      string `json:"verdict"`
	BytesPerStep int64  `json:"bytes_per_step"`
	// Steps is how many steps the figure rests on; FirstStep..LastStep
	// their numbers (-1 when the input has none).
	Steps     int   `json:"steps"`
	FirstStep int64 `json:"first_step"`
	LastStep  int64 `json:"last_step"`
	// R2 is the straight-line fit's R² for logs (1 for exact survivor
	// counts from traces and snapshots).
	R2     float64 `json:"r2"`
	Reason string  `json:"reason"`
	// leakCause comes from the top suspect, when the input has one; its
	// Kind (the leak's kind) is e.leakCause.Kind, e.Kind being the input's.
	leakCause
	// Leaks counts the distinct leaks (causes) the input found.
	Leaks int `json:"leaks,omitempty"`
	// GrowthFirst..GrowthLast are the steps the growth spans (the leak's
	// own steps, not the source's coverage); Period the steps between its
	// rises (1 every step; 0 unknown). Sustained: the source saw the end
	// of the run flat after its last growth, or no growth at all over
	// steps it covers in full (weigh.go).
	GrowthFirst int64 `json:"growth_first_step,omitempty"`
	GrowthLast  int64 `json:"growth_last_step,omitempty"`
	Period      int64 `json:"period_steps,omitempty"`
	Sustained   bool  `json:"sustained,omitempty"`
	// JumpBytes is a staircase's jump (a leak every Period steps); Plateau:
	// a log measured a plateau after growth (positive evidence that the
	// growth stopped: a bounded queue or cache).
	JumpBytes int64 `json:"jump_bytes,omitempty"`
	Plateau   bool  `json:"plateau,omitempty"`
	// BytesPerSecond is the growth rate of a log with times but no steps
	// (nvidia-smi); smiRun and smiGPU locate that growth for smiLeakRates.
	BytesPerSecond float64 `json:"bytes_per_second,omitempty"`
	smiRun         *smi.GrowthRun
	smiGPU         string
	// series names a snapshot series' evidence in sentences ("the 3
	// snapshots at steps 10, 20, 30"): its Source is only the last dump.
	series string
}

// leakCause is what a leak is and what holds it: the fields a leak's
// evidence and its answer share, with one JSON shape.
type leakCause struct {
	// Kind, KindEvidence and Fix describe the leak (container,
	// autograd_graph, retain_graph, hook, unknown) when a source knows it.
	Kind         string `json:"kind,omitempty"`
	KindEvidence string `json:"kind_evidence,omitempty"`
	Fix          string `json:"fix,omitempty"`
	// Holding is the chain of frames that keeps the memory, outermost
	// first; Location the holding line; StackNote what the stack can and
	// cannot tell; Operator the first operator of the holding chain.
	Holding   []string       `json:"holding,omitempty"`
	StackNote string         `json:"stack_note,omitempty"`
	Location  *site.Location `json:"location,omitempty"`
	Operator  string         `json:"operator,omitempty"`
}

// LeakEvidence is what this input says about leaks (memoized).
func (in *Input) LeakEvidence() []LeakEvidence {
	return Memo(in, "verdict:leak-evidence", func() []LeakEvidence { return leakEvidence(in) })
}

func leakEvidence(in *Input) []LeakEvidence {
	if in.IsDigest() {
		return slices.Clone(in.Digest.Verdict.Leak.Evidence)
	}
	var out []LeakEvidence
	// stepEvidence judges a log of steps; kind is the file's own (a
	// memory_summary() log is read as steps but is named as what it is).
	stepEvidence := func(kind SourceKind) {
		for _, s := range in.StepAnalysis().Series {
			e := LeakEvidence{Source: in.Source, Kind: kind, Steps: s.Records, FirstStep: s.FirstStep, LastStep: s.LastStep, Reason: s.Reason}
			logVerdict(&e, s)
			out = append(out, e)
		}
	}
	switch in.InputKind() {
	case SourceTrace:
		out = append(out, reportEvidence(in, SourceTrace, in.Leaks()))
	case SourceSnapshot:
		// The snapshot's history covers the steps it annotates (fromReport
		// counts them): coverage, like a trace's window, not the leak's length.
		out = append(out, reportEvidence(in, SourceSnapshot, in.SnapshotLeaks()))
	case SourceSteps:
		stepEvidence(SourceSteps)
	case SourceMemSummary:
		// memory_summary() tables logged with a step number read like a
		// step log of the steps they were printed at. NewInput gives the
		// log its tables as steps, read as a step log's; an Input made
		// without them is judged from the tables (memSummaryEvidence).
		if in.StepLog != nil {
			stepEvidence(SourceMemSummary)
		} else {
			out = append(out, memSummaryEvidence(in)...)
		}
	case SourceSMI:
		a := in.SMIAnalysis()
		e := LeakEvidence{Source: in.Source, Kind: SourceSMI, Verdict: leak.VerdictClean, FirstStep: -1, LastStep: -1, Reason: "memory.used does not grow steadily"}
		for _, g := range a.GPUs {
			if len(g.Leaks) == 0 {
				continue
			}
			l := g.Leaks[0]
			e.Verdict, e.R2, e.BytesPerSecond, e.smiRun, e.smiGPU = leak.VerdictLeak, l.R2, l.SlopeBytesPerSec, &l, g.Key
			e.Reason = fmt.Sprintf("memory.used of GPU %s grew %s at %.1f MiB/s from %s to %s (nvidia-smi has no steps)", g.Key, memtimeline.FormatBytes(l.GrowthBytes), l.SlopeBytesPerSec/(1<<20),
				l.Start.Format("15:04:05"), l.End.Format("15:04:05"))
			break
		}
		if e.Verdict == leak.VerdictClean {
			for _, g := range a.GPUs {
				if r := g.StillGrowing; r != nil {
					e.Verdict = leak.VerdictUnknown
					e.Reason = fmt.Sprintf("memory.used of GPU %s was still rising when the process or the log ended (%s over %s, to %s at %s): too short to tell a leak from a warm-up; log longer, or add the run's steps log",
						g.Key, memtimeline.FormatBytes(r.GrowthBytes), r.Duration.Round(100*time.Millisecond), memtimeline.FormatBytes(r.EndBytes), r.End.Format("15:04:05"))
					break
				}
			}
			if e.Verdict == leak.VerdictClean {
				e.Reason = "memory.used rises at start-up, then holds steady: no growth in steady state"
			}
		}
		out = append(out, e)
	}
	return out
}

// reportEvidence is the evidence of a trace or snapshot leak report.
func reportEvidence(in *Input, kind SourceKind, rep leak.Report) LeakEvidence {
	e := LeakEvidence{Source: in.Source, Kind: kind, Verdict: rep.Verdict, BytesPerStep: rep.GrowthBytesPerStep, Reason: rep.Reason, R2: 1, FirstStep: -1, LastStep: -1}
	e.Steps, e.FirstStep, e.LastStep = rep.StepsCovered()
	if rep.Verdict != leak.VerdictLeak {
		e.BytesPerStep = 0
		// A window or history with no growth in it saw no growth over
		// every step it covers.
		e.Sustained = rep.Verdict == leak.VerdictClean
		return e
	}
	var s *leak.Suspect
	if len(rep.Leaks) > 0 {
		// One leak per cause; its largest site holds the line.
		l := rep.Leaks[0]
		e.leakCause.Kind, e.KindEvidence, e.Fix, e.Leaks = l.Kind, l.Evidence, l.Fix, len(rep.Leaks)
		e.GrowthFirst, e.GrowthLast, e.Period = l.FirstStep, l.LastStep, max(l.Period, 1)
		if len(l.Sites) > 0 {
			s = &l.Sites[0]
		}
	} else if len(rep.Suspects) > 0 {
		s = &rep.Suspects[0]
		e.leakCause.Kind, e.KindEvidence, e.Fix, e.Leaks = s.Kind, s.Evidence, s.Fix, 1
	} else if g := rep.StepSeries; g != nil {
		e.GrowthFirst, e.GrowthLast, e.Period = g.GrowthFirst, g.GrowthLast, max(g.Period, 1)
		e.StackNote = leak.NoAddrNote
	}
	if s != nil {
		e.Holding, e.StackNote = s.Stack, s.StackNote
		e.Location = site.LocationOf(s.Stack)
		if l := site.LocationOf([]string{s.HoldingLine}); l != nil {
			e.Location = l // the line that holds it (leak detector's word)
		}
		if kind == SourceTrace && e.Location != nil {
			traceLine(&e, s.LineNotRecorded) // weigh.go
		}
		if s.Operator != "" {
			e.Operator = site.FirstOp(s.Operator)
		}
	}
	return e
}

// summaryEvidence fits the allocated bytes of logged memory_summary()
// tables over the steps they name, per device.
func memSummaryEvidence(in *Input) []LeakEvidence {
	byDev := map[int]*steplog.Series{}
	var devs []int
	for _, s := range in.MemSummary.Samples {
		if s.Step < 0 || s.AllocatedBytes < 0 {
			continue
		}
		ser := byDev[s.Device]
		if ser == nil {
			ser = &steplog.Series{Device: fmt.Sprint(s.Device)}
			byDev[s.Device] = ser
			devs = append(devs, s.Device)
		}
		r := steplog.Record{Step: s.Step, AllocatedBytes: s.AllocatedBytes, ReservedBytes: s.ReservedBytes, ActiveBytes: s.ActiveBytes, PeakAllocatedBytes: s.AllocatedPeakBytes, PeakReservedBytes: s.ReservedPeakBytes, AllocRetries: s.Retries, InactiveSplitBytes: s.NonReleasableBytes, OOMs: s.OOMs, Line: s.Line}
		r.NotRecorded()
		if !s.Time.IsZero() {
			r.Time, r.HasTime = float64(s.Time.UnixNano())/1e9, true
		}
		// One table per step: a later table of the same step replaces it.
		if n := len(ser.Records); n > 0 && ser.Records[n-1].Step == s.Step {
			ser.Records[n-1] = r
		} else {
			ser.Records = append(ser.Records, r)
		}
	}
	if len(devs) == 0 {
		return []LeakEvidence{{Source: in.Source, Kind: SourceMemSummary, Verdict: leak.VerdictUnknown, FirstStep: -1, LastStep: -1,
			Reason: "the memory_summary() tables carry no step number (log \"step N\" before each)"}}
	}
	log := &steplog.Log{TotalMemoryBytes: -1, MemoryFraction: -1, HistoryMaxEntries: -1}
	for _, d := range devs {
		log.Series = append(log.Series, byDev[d])
	}
	var out []LeakEvidence
	for _, s := range steplog.Analyze(log, steplog.DefaultOptions()).Series {
		e := LeakEvidence{Source: in.Source, Kind: SourceMemSummary, Steps: s.Records, FirstStep: s.FirstStep, LastStep: s.LastStep, Reason: "memory_summary() tables: " + s.Reason}
		logVerdict(&e, s)
		out = append(out, e)
	}
	return out
}

// sourceRank orders sources when their step counts tie: a step log fits a
// line through every step, a snapshot's history sees every allocation, a
// trace a window, nvidia-smi only the whole process.
func sourceRank(kind SourceKind) int {
	switch kind {
	case SourceSteps:
		return 0
	case SourceMemSummary:
		return 1
	case SourceSnapshot:
		return 2
	case SourceTrace:
		return 3
	}
	return 4
}

// better reports whether a is better evidence than b: more steps, then
// less noise, then the source kind's order.
func better(a, b LeakEvidence) bool {
	if (a.Kind == SourceSMI) != (b.Kind == SourceSMI) {
		return b.Kind == SourceSMI
	}
	if a.Steps != b.Steps {
		return a.Steps > b.Steps // coverage (weigh.go)
	}
	return sourceRank(a.Kind) < sourceRank(b.Kind)
}

// sortEvidence orders evidence best first.
func sortEvidence(ev []LeakEvidence) {
	slices.SortStableFunc(ev, func(a, b LeakEvidence) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return cmp.Compare(a.Source, b.Source)
	})
}
