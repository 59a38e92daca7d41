package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// TableQuery asks Evaluate for tables instead of a judgement: the
// operator table (ops), the allocation sites (stacks), the snapshot report
// (snapshot), one per input.
type TableQuery struct {
	Operators *OperatorQuery
	Sites     *SiteQuery
	Snapshot  bool
}

// OperatorQuery is the operator table asked for: memory of Device (-1: all
// GPUs, as torch counts), rows grouped by GroupBy, sorted by Sort (self,
// total, calls, allocs; OperatorOrder), the first Top (0: all).
type OperatorQuery struct {
	Device  int
	GroupBy chrometrace.GroupBy
	Sort    string
	Top     int
}

// SiteQuery is the allocation-site table asked for: sites made with
// SiteOptions, ranked by Sort (alloc, live, peak, allocs; SiteValue), the
// first Top (0: all); All keeps every site (folded stacks, ranked by
// their weight).
type SiteQuery struct {
	memtimeline.SiteOptions
	Sort string
	Top  int
	All  bool
}

// Table is one input's tables.
type Table struct {
	Input *Input
	// Operators are the operator rows and Summary what the trace
	// recorded (OperatorQuery).
	Operators []chrometrace.OperatorStats
	Summary   chrometrace.Summary
	// Sites are the allocation sites (SiteQuery).
	Sites []memtimeline.Site
	// Snapshot is an allocator snapshot's report.
	Snapshot *snapshot.Report

	// What the judged views (check, analyze, leaks, steps, smi, the HTML
	// page) show of the input, which Evaluate computes when it judges
	// (views.go): with Options.Sites, a trace's Summary, its Operators
	// largest self device memory first and its Sites most bytes allocated
	// first, and Frag, its fragmentation report; Leak is a trace's or
	// snapshot's leak report (or a digest's), SnapshotStats a snapshot's
	// figures (or its digest's), Steps a step log's fit, SMI an
	// nvidia-smi GPU log's analysis, Apps a compute-apps log's joined with
	// AppsGPU, the GPU log of its folder (nil: none); with Options.Page,
	// Charts are the charts the page draws, with their markers, holders
	// and explorer rows.
	// MemorySummary is a memory_summary() log's allocator figures per
	// device (or its digest's).
	MemorySummary []memsummary.Frag
	Leak          *LeakReport
	Frag          *FragReport
	// With Options.Frag (the frag view), Frag is the report as the
	// evaluation judged it, FragAnswer the answer of the input's run and
	// SnapshotPools a snapshot's pools and streams, most split first.
	FragAnswer    *FragAnswer
	SnapshotPools []FragSnapshotPool
	SnapshotStats *snapshot.Stats
	Steps         *steplog.Analysis
	SMI           *smi.Analysis
	// SMITimeline, SMIRuns and SMIRunsHidden are, per GPU of SMI, the
	// log cut into equal slices of time, the growth runs that are not
	// leaks its table lists (the longest, in time order) and how many
	// more there are.
	SMITimeline   [][]smi.Bucket
	SMIRuns       [][]smi.GrowthRun
	SMIRunsHidden []int
	Apps          *smi.AppsAnalysis
	AppsGPU       *Input
	Charts        []MemoryChart
	// With Options.Tracks (annotate), a trace's memory per GPU, its
	// ProfilerSteps in time order, and Frag its fragmentation report (the
	// reserved memory it gave back).
	Timelines    []memtimeline.DeviceTimeline
	StepsInOrder []chrometrace.Step
	// LeakKept[li][k] is what leak li of Leak kept from StepsInOrder[k]
	// (leak.Report.KeptByStep), when Leak's verdict is leak.
	LeakKept [][]int64
	// TimelinePeak is an export_memory_timeline file's highest total.
	TimelinePeak int64
}

// OperatorOrder is the row order of an operator table sorted by key
// (self, total, calls, allocs): largest first, ties by name.
func OperatorOrder(key string) (func(a, b chrometrace.OperatorStats) int, error) {
	var val func(r *chrometrace.OperatorStats) int64
	switch key {
	case "self":
		val = func(r *chrometrace.OperatorStats) int64 { return r.SelfDeviceMemory }
	case "total":
		val = func(r *chrometrace.OperatorStats) int64 { return r.DeviceMemory }
	case "calls":
		val = func(r *chrometrace.OperatorStats) int64 { return r.Calls }
	case "allocs":
		val = func(r *chrometrace.OperatorStats) int64 { return r.Allocs }
	default:
		return nil, fmt.Errorf("unknown --sort %q (want self, total, calls or allocs)", key)
	}
	return func(a, b chrometrace.OperatorStats) int {
		return cmp.Or(cmp.Compare(val(&b), val(&a)), strings.Compare(a.Name, b.Name))
	}, nil
}

// SiteValue is what ranks (or weighs) a site by key: alloc (bytes
// allocated), live (alive at the end), peak (alive at the peak), allocs.
func SiteValue(key string) (func(s *memtimeline.Site) int64, error) {
	switch key {
	case "alloc":
		return func(s *memtimeline.Site) int64 { return s.AllocBytes }, nil
	case "live":
		return func(s *memtimeline.Site) int64 { return s.LiveBytesAtEnd }, nil
	case "peak":
		return func(s *memtimeline.Site) int64 { return s.LiveBytesAtPeak }, nil
	case "allocs":
		return func(s *memtimeline.Site) int64 { return s.Allocs }, nil
	}
	return nil, fmt.Errorf("unknown value %q (want alloc, live, peak or allocs)", key)
}

// tables computes the tables q asks for, one per input, with a note for
// an input that cannot show them.
func tables(ins []*Input, q TableQuery) ([]Table, []string) {
	var out []Table
	var notes []string
	for _, in := range ins {
		t := Table{Input: in}
		if q.Operators != nil && in.Has(SourceTrace) {
			t.Operators, t.Summary = operatorTable(in, *q.Operators), in.Overview(q.Operators.Device)
		}
		if q.Sites != nil && in.Has(SourceTrace) {
			if len(in.Trace.Memory) == 0 {
				notes = append(notes, in.Source+" has no memory events; profile with profile_memory=True to see allocation sites")
			} else if len(in.Trace.PyFrames) == 0 {
				notes = append(notes, in.Source+" was recorded without Python stacks: sites are operator chains only. Profile with with_stack=True to see file:line.")
			}
			t.Sites = siteTable(in, *q.Sites)
		}
		if q.Snapshot && in.Has(SourceSnapshot) {
			t.Snapshot = in.SnapshotReport()
		}
		out = append(out, t)
	}
	return out, notes
}

// operatorTable is the trace's operator rows as q asks, sorted, the first
// q.Top.
func operatorTable(in *Input, q OperatorQuery) []chrometrace.OperatorStats {
	rows := chrometrace.Operators(in.Trace, chrometrace.OperatorOptions{Device: q.Device, GroupBy: q.GroupBy})
	if less, err := OperatorOrder(q.Sort); err == nil {
		slices.SortStableFunc(rows, less)
	}
	if q.Top > 0 && len(rows) > q.Top {
		rows = rows[:q.Top]
	}
	return rows
}

// siteTable is the trace's allocation sites as q asks, ranked, the first
// q.Top (every site with q.All).
func siteTable(in *Input, q SiteQuery) []memtimeline.Site {
	t := in.Trace
	sites := memtimeline.Sites(t, chrometrace.Attribute(t), memtimeline.Lifetimes(t, q.Device), q.SiteOptions)
	if by, err := SiteValue(q.Sort); err == nil {
		slices.SortStableFunc(sites, func(a, b memtimeline.Site) int { return cmp.Compare(by(&b), by(&a)) })
	}
	if !q.All && q.Top > 0 && len(sites) > q.Top {
		sites = sites[:q.Top]
	}
	return sites
}
