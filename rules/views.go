package rules

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/leak"
)

// The judged views' model: what check, analyze, leaks, steps, smi and the
// HTML page show of each input (its tables, in the order shown, and its
// charts with their markers, holders and explorer rows), computed here
// from the analyses the rules read, once per input, so that the report
// package only selects, formats and escapes.

// judgedTables are a judged evaluation's tables, one per input in its
// inputs' order.
func judgedTables(ev *Evaluation, o Options) []Table {
	out := make([]Table, len(ev.Inputs))
	for i, in := range ev.Inputs {
		out[i] = judgedTable(in, ev.Inputs, o)
		if o.Frag != nil {
			ev.fragTable(&out[i])
		}
	}
	return out
}

// fragTable adds to t what the frag view shows: the fragmentation answer
// of t's run, a trace's report as this evaluation judged it, a
// snapshot's pools.
func (ev *Evaluation) fragTable(t *Table) {
	in := t.Input
	t.FragAnswer = ev.FragOf(in)
	switch {
	case in.Has(SourceSnapshot):
		t.Snapshot, t.SnapshotPools = ev.snapshotFrag(in)
	case !in.Has(SourceMemSummary):
		f := ev.fragReport(in)
		t.Frag = &f
	}
}

// judgedTable is what the judged views show of in; ins are the inputs
// judged beside it (an nvidia-smi compute-apps log joins the GPU log of
// its folder).
func judgedTable(in *Input, ins []*Input, o Options) Table {
	t := Table{Input: in}
	switch {
	case in.Is(SourceTrace):
		l := in.Leaks()
		t.Leak = &l
		if o.Sites != nil {
			t.Summary = in.Overview(-1)
			t.Operators = slices.Clone(in.Operators())
			bySelf, _ := OperatorOrder("self")
			slices.SortFunc(t.Operators, bySelf)
			t.Sites = in.Sites(*o.Sites)
			slices.SortStableFunc(t.Sites, func(a, b memtimeline.Site) int { return cmp.Compare(b.AllocBytes, a.AllocBytes) })
			f := in.Frag()
			t.Frag = &f
		}
	case in.Is(SourceSnapshot):
		l := in.SnapshotLeaks()
		t.Leak = &l
		if in.Has(SourceSnapshot) {
			t.Snapshot = in.SnapshotReport()
		}
	case in.IsDigest() && in.Digest.Leaks != nil:
		l := in.digestLeaks()
		t.Leak = &l
	}
	switch {
	case in.Has(SourceMemSummary):
		t.MemorySummary = in.MemSummary.Frag()
	case in.IsDigest():
		t.MemorySummary = in.Digest.MemorySummaryFrag
	}
	if st, ok := in.snapshotStats(); ok {
		t.SnapshotStats = &st
	}
	if in.StepLog != nil {
		a := in.StepAnalysis()
		t.Steps = &a
	}
	if in.Is(SourceSMI) {
		a := in.SMIAnalysis()
		t.SMI = &a
		if in.Has(SourceSMI) {
			smiTables(&t, in.SMI)
		}
	}
	if in.Has(SourceSMIApps) {
		t.AppsGPU = gpuLogBeside(in, ins)
		a := in.AppsAnalysisBeside(t.AppsGPU)
		t.Apps = &a
	}
	if in.Timeline != nil {
		_, t.TimelinePeak, _ = in.Timeline.Peak()
	}
	if o.Tracks && in.Has(SourceTrace) {
		t.Timelines = memtimeline.TraceTimelines(in.Trace)
		t.StepsInOrder = slices.Clone(in.Trace.Steps)
		slices.SortFunc(t.StepsInOrder, func(x, y chrometrace.Step) int { return cmp.Compare(x.Start, y.Start) })
		f := in.Frag()
		t.Frag = &f
		if t.Leak != nil && t.Leak.Verdict == LeakVerdictLeak {
			for li := range t.Leak.Leaks {
				byStep := t.Leak.KeptByStep(li)
				row := make([]int64, len(t.StepsInOrder))
				for k, st := range t.StepsInOrder {
					row[k] = byStep[st.Number]
				}
				t.LeakKept = append(t.LeakKept, row)
			}
		}
	}
	if o.Page {
		t.Charts = Get(in, NewKey[[]MemoryChart](fmt.Sprintf("page-charts:%+v", in.leakOptions())), func() []MemoryChart { return pageCharts(in, t.Leak) })
	}
	return t
}

// gpuLogBeside is the one nvidia-smi GPU log among ins in in's folder, or
// nil (none, or several: which one is unknown).
func gpuLogBeside(in *Input, ins []*Input) *Input {
	var found *Input
	for _, o := range ins {
		if o.Has(SourceSMI) && filepath.Dir(o.Source) == filepath.Dir(in.Source) {
			if found != nil {
				return nil
			}
			found = o
		}
	}
	return found
}

// pageHolders is how many moments of a chart the page samples for what
// held the most, and how many lines at each.
const pageHolders, pageHolderLines = 200, 3

// pageCharts are the charts the HTML page draws of in: a trace's, one per
// GPU, with what held the most at sampled moments and the explorer's rows
// (a digest's downsampled ones as they are); a snapshot's recorded
// history, one per device that has one, with its explorer. A leak adds a
// marker at the end of each step a leak kept memory in.
func pageCharts(in *Input, l *LeakReport) []MemoryChart {
	var out []MemoryChart
	switch {
	case in.Has(SourceTrace):
		t := in.Trace
		// TraceCharts draws one chart per GPU in TraceTimelines' order.
		tls := memtimeline.TraceTimelines(t)
		for i, c := range TraceCharts(t) {
			if i < len(tls) {
				c.Holders = memtimeline.HolderSamples(t, in.Attribution(), in.Lifetimes(-1), tls[i].Device, pageHolders, pageHolderLines)
				c.Explorer = memtimeline.TraceExplorer(t, in.Attribution(), in.Lifetimes(-1), tls[i].Device, 0)
			}
			out = append(out, c)
		}
	case in.Is(SourceTrace):
		out = slices.Clone(in.Digest.Charts)
	case in.Has(SourceSnapshot):
		return snapshotCharts(in.Snapshot)
	case in.Timeline != nil:
		if tl := in.Timeline; tl.Len() > 0 {
			out = append(out, MemoryChart{Title: "memory by category", StartNs: tl.Times[0], Categories: tl.CategorySeries()})
		}
		return out
	case in.Has(SourceSMI):
		return smiCharts(in.SMI)
	}
	if l != nil && l.Verdict == LeakVerdictLeak {
		for i := range out {
			out[i].Markers = append(slices.Clip(out[i].Markers), leakMarkers(out[i], *l)...)
		}
	}
	return out
}

// snapshotCharts are an allocator snapshot's recorded history, one chart
// per device that has one: the active bytes after each allocation and
// completed free, relative to the start of the history.
func snapshotCharts(s *snapshot.Snapshot) []MemoryChart {
	var out []MemoryChart
	for dev, entries := range s.DeviceTraces {
		var ser memtimeline.Series
		ser.Name = "active (recorded history)"
		var cur int64
		for _, e := range entries.All() {
			switch e.Action {
			case snapshot.ActionAlloc:
				cur += e.Size
			case snapshot.ActionFreeCompleted:
				cur -= e.Size
			default:
				continue
			}
			ser.T = append(ser.T, e.TimeUS*1000)
			ser.V = append(ser.V, cur)
		}
		if ser.Len() == 0 {
			continue
		}
		out = append(out, MemoryChart{Device: dev, Title: fmt.Sprintf("cuda:%d (relative to the start of the history)", dev), StartNs: ser.T[0], Allocated: ser,
			Explorer: snapshot.Explorer(entries, 0)})
	}
	return out
}

// smiCharts are an nvidia-smi log's memory.used over time, one chart per
// GPU that logged it, with memory.total beside when every sample has it.
func smiCharts(log *smi.Log) []MemoryChart {
	var out []MemoryChart
	for i, g := range log.GPUs {
		s := memtimeline.Series{Name: "memory.used"}
		var total memtimeline.Series
		total.Name = "memory.total"
		for _, smp := range g.Samples {
			if smp.UsedBytes < 0 {
				continue
			}
			s.T = append(s.T, smp.Time.UnixNano())
			s.V = append(s.V, smp.UsedBytes)
			if smp.TotalBytes > 0 {
				total.T = append(total.T, smp.Time.UnixNano())
				total.V = append(total.V, smp.TotalBytes)
			}
		}
		if s.Len() == 0 {
			continue
		}
		c := MemoryChart{Device: i, Title: "GPU " + g.Key, StartNs: s.T[0], Allocated: s}
		if total.Len() == s.Len() {
			c.Reserved = total
		}
		out = append(out, c)
	}
	return out
}

// leakMarkers pins, at the end of each step in which a leak kept memory,
// what it kept then and so far: the growth shows on the chart where it
// happens, with annotate's figures (leak.Report.KeptByStep).
func leakMarkers(c MemoryChart, l LeakReport) []ChartMarker {
	var out []ChartMarker
	ends := map[string]int64{}
	for _, s := range c.Steps {
		ends[s.Name] = s.EndNs
	}
	for li := range l.Leaks {
		byStep := l.KeptByStep(li)
		var kept int64
		for _, n := range slices.Sorted(maps.Keys(byStep)) {
			b := byStep[n]
			if b == 0 {
				continue
			}
			kept += b
			end, ok := ends[fmt.Sprintf("ProfilerStep#%d", n)]
			if !ok {
				continue
			}
			// The allocated level at the step's end, for the pin's height.
			a := c.Allocated
			k, _ := slices.BinarySearch(a.T, end+1)
			if k == 0 {
				continue
			}
			out = append(out, ChartMarker{Name: leak.MarkerName(li, n, b, kept), TNs: end, Bytes: a.V[k-1]})
		}
	}
	return out
}

// smiTimelineColumns is how many slices of time the smi view cuts a GPU's
// log into (its sparklines, its JSON timeline); smiShownRuns caps the
// growth runs that are not leaks its table lists per GPU.
const smiTimelineColumns, smiShownRuns = 60, 10

// smiTables adds to t, per GPU of its nvidia-smi analysis, the log's
// timeline and the growth runs that are not leaks the table lists: the
// longest, in time order.
func smiTables(t *Table, log *smi.Log) {
	for _, g := range t.SMI.GPUs {
		t.SMITimeline = append(t.SMITimeline, smi.Buckets(log.GPU(g.Key), smiTimelineColumns))
		var other []smi.GrowthRun
		for _, r := range g.Runs {
			if !r.Leak {
				other = append(other, r)
			}
		}
		hidden := 0
		if len(other) > smiShownRuns {
			slices.SortStableFunc(other, func(a, b smi.GrowthRun) int { return cmp.Compare(b.Duration, a.Duration) })
			hidden = len(other) - smiShownRuns
			other = other[:smiShownRuns]
			slices.SortStableFunc(other, func(a, b smi.GrowthRun) int { return a.Start.Compare(b.Start) })
		}
		t.SMIRuns = append(t.SMIRuns, other)
		t.SMIRunsHidden = append(t.SMIRunsHidden, hidden)
	}
}
