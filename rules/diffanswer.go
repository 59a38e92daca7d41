package rules

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/diff"
	"github.com/torchmem/torchmem/rules/leak"
)

// ParseBudget reads a --fail-if condition ("peak_allocated > +10%").
func ParseBudget(s string) (DiffBudget, error) { return diff.ParseBudget(s) }

// diffSideOf reduces one side's evaluated inputs (one kind and rank) to
// what a comparison reads, under the name source: a trace's operators,
// sites and leak suspects, a snapshot's segments, a digest's saved side.
// Its leak verdict is the Evaluation's (leak when a run or rank leaks,
// else the first one's), so that diff says what analyze says of each side.
func diffSideOf(source string, ev *Evaluation) *DiffSide {
	var sides []*diff.Side
	for _, in := range ev.Inputs {
		switch {
		case in.IsDigest():
			side := *in.Digest.Side
			side.Source = in.Source
			sides = append(sides, &side)
		case in.Has(SourceTrace):
			sides = append(sides, NewInputSide(in))
		default:
			sides = append(sides, diff.NewSnapshotSide(in.Source, in.SnapshotReport()))
		}
	}
	s := diff.Merge(source, sides)
	for i, v := range ev.Verdicts {
		if i == 0 || v.Leak.Verdict == leak.VerdictLeak {
			s.LeakVerdict = v.Leak.Verdict
		}
		if v.Leak.Verdict == leak.VerdictLeak {
			break
		}
	}
	return s
}

// DiffGates are what fails a comparison without any other flag: the leak
// gate (HEAD leaks where BASE did not, or a new suspect keeping at least
// LeakThreshold bytes per step) and the budgets.
type DiffGates struct {
	Leak          bool
	LeakThreshold int64
	Budgets       []DiffBudget
}

// DiffAnswer is a comparison with what it concludes.
type DiffAnswer struct {
	*diff.Diff
	// NewLeak says why the leak gate failed; Violations the budgets
	// exceeded, each "condition: why".
	NewLeak, Violations []string
	// Headline is the conclusion in one line, the same in every format.
	Headline string
}

// Passed reports whether neither the leak gate nor a budget failed.
func (a *DiffAnswer) Passed() bool { return len(a.NewLeak)+len(a.Violations) == 0 }

// compareSides compares HEAD with BASE (top movers per table) and judges
// the result by the gates.
func compareSides(base, head *DiffSide, g DiffGates, top int) *DiffAnswer {
	a := &DiffAnswer{Diff: diff.Compare(base, head, top)}
	if g.Leak {
		a.NewLeak = a.LeakGate(g.LeakThreshold)
	}
	for _, b := range g.Budgets {
		if over, why := b.Exceeded(a.Diff); over {
			a.Violations = append(a.Violations, b.Text+": "+why)
		}
	}
	a.Headline = diffHeadline(a.Diff, a.NewLeak, a.Violations, len(g.Budgets))
	return a
}

func diffHeadline(d *diff.Diff, leaks, violations []string, budgets int) string {
	switch {
	case len(leaks) > 0 && len(violations) > 0:
		return fmt.Sprintf("LEAK (new in HEAD): %s; OVER BUDGET: %s", strings.Join(leaks, "; "), strings.Join(violations, "; "))
	case len(leaks) > 0:
		return fmt.Sprintf("LEAK (new in HEAD): %s", strings.Join(leaks, "; "))
	case len(violations) > 0:
		return fmt.Sprintf("OVER BUDGET: %s", strings.Join(violations, "; "))
	case !d.Changed:
		return "no change in GPU memory"
	}
	var peak diff.MetricDelta
	for _, m := range d.Metrics {
		if m.Metric == "peak_allocated" {
			peak = m
		}
	}
	s := fmt.Sprintf("peak allocated %s (%+.1f%%)", signedBytes(peak.Delta), peak.Pct)
	if d.BaseVerdict != d.HeadVerdict {
		s += fmt.Sprintf(", leak verdict %s -> %s", d.BaseVerdict, d.HeadVerdict)
	}
	if len(d.NewSuspects) > 0 {
		s += fmt.Sprintf(", %d new leak suspects", len(d.NewSuspects))
	}
	if budgets > 0 {
		s += ", within budget"
	}
	return s
}

func signedBytes(n int64) string {
	if n > 0 {
		return "+" + memtimeline.FormatBytes(n)
	}
	return memtimeline.FormatBytes(n)
}
