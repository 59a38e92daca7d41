package rules

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/leak"
)

// LeakAnswer is the leak verdict of a run and rank, from all its evidence.
type LeakAnswer struct {
	Verdict      string `json:"verdict"`
	BytesPerStep int64  `json:"bytes_per_step"`
	// BytesPerSecond is the rate of growth when the evidence is timed
	// rather than stepped (nvidia-smi); 0 otherwise.
	BytesPerSecond float64 `json:"bytes_per_second,omitempty"`
	// From names the evidence the figure is taken from and why; FromFile
	// is its file.
	From     string `json:"from,omitempty"`
	FromFile string `json:"from_file,omitempty"`
	// leakCause is what the leak is and what holds it, from the sources
	// that know (judgeLeak picks each part from the best one).
	leakCause
	// Leaks is how many distinct leaks the best source found (0: none, or
	// no source counts them); always present, so that one trace and the
	// folder holding it give one shape.
	Leaks  int    `json:"leaks"`
	Reason string `json:"reason"`
	// Agreement says which sources agree or disagree, with their figures;
	// Settle says what to record when they disagree.
	Agreement string         `json:"agreement"`
	Settle    string         `json:"settle"`
	Evidence  []LeakEvidence `json:"evidence"`
	// Forecast is when the leak fills the memory the process may use
	// (nil when the headroom is not known, or the run ran out already).
	Forecast *Forecast `json:"forecast,omitempty"`
}

func describeEvidence(e LeakEvidence) string {
	var s string
	if e.Steps > 0 {
		s = fmt.Sprintf("%d steps", e.Steps)
		if e.FirstStep >= 0 {
			s += fmt.Sprintf(": %d..%d", e.FirstStep, e.LastStep)
		}
	}
	if e.Verdict == leak.VerdictLeak && (e.GrowthFirst > 0 || e.GrowthLast > 0) && (e.GrowthFirst != e.FirstStep || e.GrowthLast != e.LastStep || e.Period > 1) {
		every := "every step"
		if e.Period > 1 {
			every = fmt.Sprintf("every %d steps", e.Period)
			if e.JumpBytes > 0 {
				every = memtimeline.FormatBytes(e.JumpBytes) + " " + every
			}
		}
		s += fmt.Sprintf("; grows %s over steps %d..%d", every, e.GrowthFirst, e.GrowthLast)
	}
	return s
}

// from names the evidence a figure comes from.
func (k kindCount) from(e LeakEvidence) string {
	if e.series != "" {
		return e.series // names its steps
	}
	if d := describeEvidence(e); d != "" {
		return k.name(e) + " (" + d + ")"
	}
	return k.name(e)
}

// judgeLeak combines the evidence of one run and rank.
func judgeLeak(ev []LeakEvidence) LeakAnswer {
	ev = slices.Clone(ev)
	sortEvidence(ev)
	kinds := countKinds(ev)
	ans := LeakAnswer{Verdict: leak.VerdictUnknown, Evidence: ev}
	if ans.Evidence == nil {
		ans.Evidence = []LeakEvidence{}
	}
	var leaks, cleans []LeakEvidence
	for _, e := range ev {
		switch e.Verdict {
		case leak.VerdictLeak:
			leaks = append(leaks, e)
		case leak.VerdictClean:
			cleans = append(cleans, e)
		}
	}
	best := func(es []LeakEvidence) LeakEvidence {
		b := es[0]
		for _, e := range es[1:] {
			if better(e, b) {
				b = e
			}
		}
		return b
	}
	var over *LeakEvidence
	if len(leaks) > 0 {
		over = overrules(best(leaks), cleans)
	}
	switch {
	case over != nil:
		overruled(&ans, kinds, *over, leaks)
	case len(leaks) > 0:
		b := best(leaks)
		ans.Verdict, ans.BytesPerStep, ans.BytesPerSecond, ans.Reason = leak.VerdictLeak, b.BytesPerStep, b.BytesPerSecond, b.Reason
		ans.From, ans.FromFile = kinds.from(b), b.Source
		if len(leaks)+len(cleans) > 1 {
			ans.From += ": the source covering the most steps"
		}
		// The holding line: the snapshot has the exact allocating line and
		// its callers, a trace the operator chain under the def lines.
		var site *LeakEvidence
		for i := range leaks {
			e := &leaks[i]
			if len(e.Holding) == 0 && e.Location == nil {
				continue
			}
			if site == nil || (e.Kind == SourceSnapshot && site.Kind != SourceSnapshot) {
				site = e
			}
		}
		ans.Leaks = b.Leaks
		if ans.Leaks == 0 && site != nil {
			// A log counts growth, not leaks: the count of the source
			// that names the line.
			ans.Leaks = site.Leaks
		}
		if site != nil {
			ans.Holding, ans.Location, ans.StackNote = site.Holding, site.Location, site.StackNote
			if ans.Operator = site.Operator; ans.Operator == "" {
				for _, e := range leaks {
					if e.Operator != "" {
						ans.Operator = e.Operator
						break
					}
				}
			}
		}
		// The kind from whichever source knows it: a trace tells it from
		// autograd sequence numbers and hook call counts, so it goes first.
		byKind := slices.Clone(leaks)
		slices.SortStableFunc(byKind, func(a, b LeakEvidence) int {
			rank := func(e LeakEvidence) int {
				switch {
				case e.leakCause.Kind == "" || e.leakCause.Kind == leak.KindUnknown:
					return 3
				case e.Kind == SourceTrace:
					return 0
				case e.Kind == SourceSnapshot:
					return 1
				}
				return 2
			}
			return cmp.Compare(rank(a), rank(b))
		})
		if len(byKind) > 0 && byKind[0].leakCause.Kind != "" {
			e := byKind[0]
			ans.Kind, ans.KindEvidence, ans.Fix = e.leakCause.Kind, e.KindEvidence, e.Fix
		}
		ans.Agreement, ans.Settle = kinds.agreement(b, leaks, cleans)
	case len(cleans) > 0:
		b := best(cleans)
		ans.Verdict, ans.Reason = leak.VerdictClean, b.Reason
		ans.From, ans.FromFile = kinds.from(b), b.Source
		if len(cleans) > 1 {
			ans.Agreement = "all agree: " + kinds.figures(cleans)
		}
	default:
		if len(ev) > 0 {
			ans.Reason = ev[0].Reason
			ans.From = filepath.Base(ev[0].Source)
		} else {
			ans.Reason = "no input here can tell growth per step (a trace with profile_memory, an allocator snapshot with history, or a per-step log)"
		}
	}
	return ans
}

// kindCount counts the evidence of each kind: a source is named by its
// kind alone ("the step log") when it is the only one of that kind, by its
// file otherwise.
type kindCount map[SourceKind]int

func countKinds(ev []LeakEvidence) kindCount {
	k := kindCount{}
	for _, e := range ev {
		k[e.Kind]++
	}
	return k
}

// name is how a sentence names the evidence's source.
func (k kindCount) name(e LeakEvidence) string {
	if e.series != "" {
		return e.series
	}
	if k[e.Kind] > 1 {
		name := filepath.Base(e.Source)
		if _, ok := dumpPlaceOf(e.Source); ok {
			// a dump tree's files differ by their iteration folder
			name = filepath.Join(filepath.Base(filepath.Dir(e.Source)), name)
		}
		return string(e.Kind) + " " + name
	}
	switch e.Kind {
	case SourceSteps:
		return "the step log"
	case SourceMemSummary:
		return "the memory_summary() log"
	case SourceSMI:
		return "nvidia-smi"
	}
	return "the " + string(e.Kind)
}

func (k kindCount) figures(es []LeakEvidence) string {
	var parts []string
	for _, e := range es {
		f := "clean"
		if e.Verdict == leak.VerdictLeak {
			f = memtimeline.FormatBytes(e.BytesPerStep) + "/step"
			if e.BytesPerSecond > 0 {
				f = fmt.Sprintf("%.1f MiB/s", e.BytesPerSecond/(1<<20))
				if e.BytesPerStep > 0 {
					f = memtimeline.FormatBytes(e.BytesPerStep) + "/step (" + f + ")"
				}
			}
		}
		parts = append(parts, k.name(e)+" "+f)
	}
	return strings.Join(parts, ", ")
}

// agreement says which sources agree with the best leak figure (within
// 25% or 1 MiB), which disagree, and what to record to settle it.
func (k kindCount) agreement(best LeakEvidence, leaks, cleans []LeakEvidence) (string, string) {
	var agree, differ []LeakEvidence
	for _, e := range leaks {
		if e.Source == best.Source && e.Kind == best.Kind && e.series == best.series {
			continue
		}
		d := math.Abs(float64(e.BytesPerStep - best.BytesPerStep))
		if e.Kind == SourceSMI || d <= max(0.25*float64(best.BytesPerStep), 1<<20) {
			agree = append(agree, e)
		} else {
			differ = append(differ, e)
		}
	}
	var parts []string
	if len(agree) > 0 {
		parts = append(parts, "agree: "+k.figures(agree))
	}
	if len(differ) > 0 {
		parts = append(parts, "differ: "+k.figures(differ))
	}
	var settle string
	if len(cleans) > 0 {
		parts = append(parts, "no growth in: "+k.figures(cleans))
		var windowClean, logClean bool
		for _, c := range cleans {
			switch c.Kind {
			case SourceTrace, SourceSnapshot:
				windowClean = true
			case SourceSteps, SourceMemSummary:
				logClean = true
			}
		}
		bestIsLog := best.Kind == SourceSteps || best.Kind == SourceMemSummary || best.Kind == SourceSMI
		switch {
		case bestIsLog && windowClean:
			settle = "the step log grows but the profiled window does not: the leak starts after the window or comes and goes; profile later steps (a later wait= in the schedule, or TORCHMEM_ACTIVE) and keep the allocator history on, then run torchmem again"
		case !bestIsLog && logClean:
			settle = "the profiled window keeps memory step after step but the step log over the whole run does not grow: it stops (a cache that fills up) or is freed later; log more steps and profile a window late in the run to see whether it levels off"
		default:
			settle = "the sources cover different steps: record the allocator history (snapshot) over the whole run together with the step log"
		}
	}
	if len(differ) > 0 && settle == "" {
		settle = "the figures differ: a window of few steps counts the survivors it sees, a log fits every step; profile more steps (raise active= in the schedule) to narrow it"
	}
	return strings.Join(parts, "; "), settle
}
