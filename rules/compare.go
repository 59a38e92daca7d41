package rules

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// CompareQuery is what diff compares and what fails it: Base's inputs
// (BASE, named BaseArg) against the evaluated inputs (HEAD, HeadArg),
// judged by Gates, Top movers per table.
type CompareQuery struct {
	Base             []*Input
	BaseArg, HeadArg string
	Gates            DiffGates
	Top              int
}

// The diff gates' rule ids: a comparison that fails a gate is a finding at
// error severity, so that diff exits by the one policy.
const (
	ruleDiffLeak   = "diff.leak"
	ruleDiffBudget = "diff.budget"
)

// DiffPair is one compared pair: BASE's and HEAD's inputs of one kind and
// rank, and what their comparison concludes.
type DiffPair struct {
	Answer     *DiffAnswer
	Base, Head []*Input
	// Chart, with Options.Page (diff's HTML page) and a trace on each
	// side, is both runs' allocated memory on one axis aligned at their
	// first profiled step: Allocated is the base's, Reserved the head's
	// (nil: either side has none).
	Chart *MemoryChart
}

// diffGroup is the inputs of one kind and rank on one side of a diff.
type diffGroup struct {
	kind   SourceKind
	rank   int64
	inputs []*Input
}

// diffGroups groups one side's inputs by kind and rank: several traces of
// one rank (profiling windows) are compared as one. A summary pairs like
// the file it summarizes.
func diffGroups(ins []*Input) []*diffGroup {
	var groups []*diffGroup
	for _, in := range ins {
		kind := in.InputKind()
		var g *diffGroup
		for _, h := range groups {
			if h.kind == kind && h.rank == in.Rank {
				g = h
			}
		}
		if g == nil {
			g = &diffGroup{kind: kind, rank: in.Rank}
			groups = append(groups, g)
		}
		g.inputs = append(g.inputs, in)
	}
	return groups
}

// side reduces a group to what a diff compares, judged with rs.
func (g *diffGroup) side(arg string, rs RuleSet) *DiffSide {
	source := arg
	if len(g.inputs) == 1 {
		source = g.inputs[0].Source
	} else if g.rank >= 0 {
		source = fmt.Sprintf("%s (rank %d)", arg, g.rank)
	}
	return diffSideOf(source, evaluate(rs, g.inputs, Options{}))
}

func kindOrder(k SourceKind) int {
	if k == SourceTrace {
		return 0
	}
	return 1
}

// pairSides pairs the groups of both sides by kind and rank. When a kind
// has one group on each side, they pair whatever their ranks (two single
// files). Groups without a counterpart are named in unpaired.
func pairSides(base, head []*diffGroup, baseArg, headArg string) (pairs [][2]*diffGroup, unpaired []string) {
	used := map[*diffGroup]bool{}
	// Indexed by kind and rank, so that thousands of ranks pair in linear
	// time (a nested scan was cubic).
	type key struct {
		kind SourceKind
		rank int64
	}
	count := map[SourceKind][2]int{}
	heads := map[key][]*diffGroup{}
	onlyHead := map[SourceKind]*diffGroup{}
	for _, b := range base {
		c := count[b.kind]
		c[0]++
		count[b.kind] = c
	}
	for _, h := range head {
		c := count[h.kind]
		c[1]++
		count[h.kind] = c
		heads[key{h.kind, h.rank}] = append(heads[key{h.kind, h.rank}], h)
		onlyHead[h.kind] = h
	}
	// Traces first: they say the most.
	slices.SortStableFunc(base, func(a, b *diffGroup) int { return cmp.Compare(kindOrder(a.kind), kindOrder(b.kind)) })
	for _, b := range base {
		var h *diffGroup
		if c := count[b.kind]; c[0] == 1 && c[1] == 1 {
			h = onlyHead[b.kind] // two single files pair whatever their ranks
		} else if q := heads[key{b.kind, b.rank}]; len(q) > 0 {
			h, heads[key{b.kind, b.rank}] = q[0], q[1:]
		}
		if h != nil && !used[h] {
			pairs = append(pairs, [2]*diffGroup{b, h})
			used[b], used[h] = true, true
		}
	}
	for _, side := range []struct {
		arg, other string
		gs         []*diffGroup
	}{{baseArg, headArg, base}, {headArg, baseArg, head}} {
		for _, g := range side.gs {
			if !used[g] {
				unpaired = append(unpaired, fmt.Sprintf("%s: no %s of rank %d in %s to compare with", g.inputs[0].Source, g.kind, g.rank, side.other))
			}
		}
	}
	return pairs, unpaired
}

// compare is Evaluate with o.Compare: head's inputs against the query's
// base, pair by pair, each side judged with rs. A pair that fails a gate
// is a finding at error severity (ruleDiffLeak, ruleDiffBudget).
func compare(head []*Input, rs RuleSet, o Options) *Evaluation {
	q := o.Compare
	ev := &Evaluation{RuleSet: rs, Options: o, Inputs: head, Findings: []Finding{}}
	pairs, unpaired := pairSides(diffGroups(q.Base), diffGroups(head), q.BaseArg, q.HeadArg)
	ev.Unpaired = unpaired
	for _, p := range pairs {
		a := compareSides(p[0].side(q.BaseArg, rs), p[1].side(q.HeadArg, rs), q.Gates, q.Top)
		pair := DiffPair{Answer: a, Base: p[0].inputs, Head: p[1].inputs}
		if o.Page {
			pair.Chart = diffChart(pair.Base, pair.Head)
		}
		ev.Diffs = append(ev.Diffs, pair)
		source := p[1].inputs[0].Source
		if len(a.NewLeak) > 0 {
			ev.Findings = append(ev.Findings, Finding{Rule: ruleDiffLeak, Severity: Error, Source: source, Title: a.Headline})
		}
		if len(a.Violations) > 0 {
			ev.Findings = append(ev.Findings, Finding{Rule: ruleDiffBudget, Severity: Error, Source: source, Title: a.Headline})
		}
	}
	ev.count()
	return ev
}

// diffChart is the allocated memory of the first trace of each side on
// one axis, aligned at its first profiled step (nil: a side without a
// trace or without memory).
func diffChart(base, head []*Input) *MemoryChart {
	if len(base) == 0 || len(head) == 0 || !base[0].Has(SourceTrace) || !head[0].Has(SourceTrace) {
		return nil
	}
	b, h := stepAligned(base[0].Trace, "base allocated"), stepAligned(head[0].Trace, "head allocated")
	if b.Len() == 0 || h.Len() == 0 {
		return nil
	}
	return &MemoryChart{Title: "allocated, aligned at the first profiled step", StartNs: 0, Allocated: b, Reserved: h}
}

// stepAligned returns the trace's allocated series with time measured from
// its first ProfilerStep (or first event).
func stepAligned(t *chrometrace.Trace, name string) memtimeline.Series {
	tls := memtimeline.TraceTimelines(t)
	if len(tls) == 0 {
		return memtimeline.Series{}
	}
	s := tls[0].Allocated
	origin := s.T[0]
	for _, st := range t.Steps {
		if origin == s.T[0] || st.Start < origin {
			origin = st.Start
		}
	}
	out := memtimeline.Series{Name: name, T: make([]int64, s.Len()), V: s.V}
	for i, ts := range s.T {
		out.T[i] = ts - origin
	}
	return out
}
