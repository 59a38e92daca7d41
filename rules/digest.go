package rules

import (
	"cmp"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/diff"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/zerograd"
)

// A Digest is one input's analyses without its raw data: what `torchmem
// summarize` computes where the trace is (a cluster node) and writes to a
// small file, and what every multi-input command answers from where the
// raw file is absent (the reduce step). An Input with a Digest has none of
// Trace, Snapshot, ... set; the shared analyses below read the digest
// instead, so the verdict of a run and rank is the same from the digests
// as from the files. The file format around it is package rules/digest.
type Digest struct {
	// Verdict is the input judged on its own: its leak evidence, OOMs,
	// fragmentation and peak answers, which judge combines with the other
	// inputs of its run and rank like those of a raw input.
	Verdict Verdict `json:"verdict"`
	// Leaks is the leak report (per-step survivors, leaks with their sites,
	// suspects with their stacks) with default options; traces and
	// snapshots only.
	Leaks *leak.Report `json:"leaks,omitempty"`
	// Frag is the trace's fragmentation report (default options).
	Frag *frag.Report `json:"fragmentation,omitempty"`
	// Overview is what the trace recorded (steps, GPU, peaks).
	Overview *chrometrace.Summary `json:"trace_summary,omitempty"`
	// StepTimeNs is the median ProfilerStep duration (0: no steps).
	StepTimeNs int64 `json:"step_time_ns,omitempty"`
	// Operators are the top rows of the per-operator table by Self CUDA
	// Mem.
	Operators []chrometrace.OperatorStats `json:"operators,omitempty"`
	// Side is the input reduced for `torchmem diff` (its site and operator
	// maps cut to the largest entries).
	Side *diff.Side `json:"diff_side,omitempty"`
	// ZeroGrad, opHoldings (the top rows, with the peak they refer to) and
	// GPUActivity are what the checklist reads of a trace.
	ZeroGrad      *zerograd.Report `json:"zero_grad,omitempty"`
	OpHoldings    []OpHolding      `json:"op_holdings,omitempty"`
	OpHoldingPeak int64            `json:"op_holdings_peak_bytes,omitempty"`
	GPUActivity   bool             `json:"gpu_activity,omitempty"`
	// TopOps is memory.top-ops-share's metric (topOpsShare), which the
	// top rows alone cannot give.
	TopOps *topOps `json:"top_ops,omitempty"`
	// TraceBaseNs is the trace's clock origin (to line its peak up with
	// torch's memory timeline of the same run).
	TraceBaseNs int64 `json:"trace_base_ns,omitempty"`
	// TorchTimeline is an export_memory_timeline file's categories over
	// time, at most TimelinePoints instants with the total's peaks kept.
	TorchTimeline *exported.Timeline `json:"torch_timeline,omitempty"`
	// Sites are the top allocation sites by bytes (defaultSiteOptions).
	Sites []memtimeline.Site `json:"sites,omitempty"`
	// Lines counts a log's lines (step log) or rows (nvidia-smi); GPUs the
	// GPUs an nvidia-smi log saw; SnapshotStats a snapshot's totals.
	Lines         int             `json:"lines,omitempty"`
	GPUs          int             `json:"gpus,omitempty"`
	SnapshotStats *snapshot.Stats `json:"snapshot_stats,omitempty"`
	// LiveSites are a snapshot's live blocks by site and pool, the largest
	// digestLiveSites (a snapshot series is judged from them).
	LiveSites []snapshot.LiveSite `json:"live_sites,omitempty"`
	// Tables and MemorySummaryFrag are a memory_summary() log's tables
	// and its allocator figures per device.
	Tables            int               `json:"tables,omitempty"`
	MemorySummaryFrag []memsummary.Frag `json:"memory_summary,omitempty"`
	// Charts are the trace's memory charts per GPU (allocated and
	// reserved, at most TimelinePoints instants each with every peak and
	// trough kept; ProfilerStep bands, OOM markers, what held the most at
	// holderSamples moments), as the report draws them.
	Charts []MemoryChart `json:"charts,omitempty"`
	// OOMFacts are the input's out-of-memory records, judged with the
	// other inputs of its run and rank at the reduce.
	OOMFacts *OOMFacts `json:"oom_facts,omitempty"`
	// StepFacts are a step log's allocator facts (retries, split, limit,
	// settings, reserved growth); AllocSettings and HistoryEvents a
	// snapshot's allocator_settings and history length (fragcost.go,
	// allocsettings.go).
	StepFacts     *StepFacts                  `json:"step_facts,omitempty"`
	AllocSettings *snapshot.AllocatorSettings `json:"allocator_settings,omitempty"`
	HistoryEvents int64                       `json:"history_events,omitempty"`
	// HistoryOrphanFrees: the history's frees without their allocation.
	HistoryOrphanFrees int64 `json:"history_orphan_frees,omitempty"`
	// Findings are every built-in rule's findings with default thresholds.
	Findings []DigestFinding `json:"findings"`
}

// DigestFinding is a finding as a digest keeps it.
type DigestFinding struct {
	Finding
	// BelowThreshold: the rule fired on evidence with a size under its
	// threshold (at most a warning, whatever the rule's severity).
	BelowThreshold bool `json:"below_threshold,omitempty"`
}

// TimelinePoints bounds a digest's memory timelines: every peak and
// trough of the total survives (memtimeline.DownsampleIndices).
const TimelinePoints = 512

// holderSamples is how many moments of a digest's chart list what held
// the most memory.
const holderSamples = 100

// digestLiveSites is how many live sites of a snapshot a digest keeps.
const digestLiveSites = 200

// digestTopRows is how many operator rows and diff sites a digest keeps.
const digestTopRows = 25

// NeedsFullTrace says, in one line, what a digest cannot answer.
const NeedsFullTrace = "a summary holds verdicts, leaks, peaks, fragmentation, findings and the top operators; the full operator and stack tables, other thresholds (--rules, --min-bytes-per-step) and the per-allocation views need the trace itself"

// MakeDigest computes in's digest: every analysis a digest keeps. in is
// a file's input (summarize reads no digests): what it keeps follows its
// kind.
func MakeDigest(in *Input) *Digest {
	rs := Builtin()
	var findings []Finding
	if in.Has(SourceTrace) {
		findings = RunWith(rs, in, defaultSiteOptions())
	} else {
		findings = Run(rs, in)
	}
	d := &Digest{Verdict: judge(in.Source, []*Input{in}), Findings: []DigestFinding{}}
	d.Verdict.Rank = in.Rank
	d.Verdict.Inputs = nil // the raw input is what a digest lets go of
	of := in.OOMFacts()
	d.OOMFacts = &of
	d.StepFacts = in.StepFacts()
	if in.Has(SourceSnapshot) {
		st := in.SnapshotReport().Settings
		d.AllocSettings, d.HistoryEvents, d.HistoryOrphanFrees = &st, historyEvents(in.SnapshotReport()), orphanFrees(in.Snapshot)
	}
	for _, f := range findings {
		d.Findings = append(d.Findings, DigestFinding{Finding: f, BelowThreshold: f.belowThreshold})
	}
	switch in.InputKind() {
	case SourceTrace:
		l := in.Leaks()
		d.Leaks = &l
		f := in.Frag()
		d.Frag = &f
		s := in.Overview(-1)
		d.Overview = &s
		d.StepTimeNs = medianStepNs(in.Trace)
		ops := slices.Clone(in.Operators())
		slices.SortStableFunc(ops, func(a, b chrometrace.OperatorStats) int {
			switch {
			case a.SelfDeviceMemory != b.SelfDeviceMemory:
				if a.SelfDeviceMemory > b.SelfDeviceMemory {
					return -1
				}
				return 1
			case a.Name < b.Name:
				return -1
			case a.Name > b.Name:
				return 1
			}
			return 0
		})
		d.Operators = ops[:min(len(ops), digestTopRows)]
		d.Side = trimSide(NewInputSide(in), digestTopRows)
		zg := in.ZeroGrad()
		d.ZeroGrad = &zg
		hs, peak := in.opHoldings()
		hs = slices.Clone(hs)
		slices.SortStableFunc(hs, func(a, b OpHolding) int { return cmp.Compare(b.HeldAtPeak, a.HeldAtPeak) })
		d.OpHoldings, d.OpHoldingPeak = hs[:min(len(hs), digestTopRows)], peak
		d.GPUActivity = in.hasGPUSteps()
		names, top, total := topOpsShare(in)
		d.TopOps = &topOps{Names: names, TopBytes: top, TotalBytes: total}
		d.TraceBaseNs = in.Trace.Meta.BaseTimeNanoseconds
		d.Charts = traceCharts(in)
		sites := in.Sites(defaultSiteOptions())
		slices.SortStableFunc(sites, func(a, b memtimeline.Site) int { return cmp.Compare(b.AllocBytes, a.AllocBytes) })
		d.Sites = sites[:min(len(sites), digestTopRows)]
	case SourceMemSummary:
		d.Lines, d.Tables, d.MemorySummaryFrag = in.MemSummary.Lines, len(in.MemSummary.Samples), in.MemSummary.Frag()
	case SourceSteps:
		d.Lines = in.StepLog.Lines
	case SourceSMI:
		d.Lines, d.GPUs = in.SMI.Rows, len(in.SMI.GPUs)
	case SourceTimeline:
		d.TorchTimeline = downsampleCategories(in.Timeline, TimelinePoints)
	case SourceSnapshot:
		l := in.SnapshotLeaks()
		d.Leaks = &l
		d.Side = trimSide(diff.NewSnapshotSide(in.Source, in.SnapshotReport()), digestTopRows)
		st := in.SnapshotReport().Stats
		d.SnapshotStats = &st
		d.LiveSites = in.LiveSites()
		if len(d.LiveSites) > digestLiveSites {
			d.LiveSites = d.LiveSites[:digestLiveSites]
		}
	}
	return d
}

// defaultSiteOptions are the allocation sites analyze and report show.
func defaultSiteOptions() memtimeline.SiteOptions {
	return memtimeline.SiteOptions{Device: -1, Depth: 5}
}

// medianStepNs is the median ProfilerStep duration of a trace.
func medianStepNs(t *chrometrace.Trace) int64 {
	if len(t.Steps) == 0 {
		return 0
	}
	d := make([]int64, len(t.Steps))
	for i, s := range t.Steps {
		d[i] = s.Dur
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// StepTimeNs is the median ProfilerStep duration of a trace input (from
// its digest for one read back); 0 when it has none.
func (in *Input) StepTimeNs() int64 {
	switch {
	case in.IsDigest():
		return in.Digest.StepTimeNs
	case in.Has(SourceTrace):
		return Memo(in, "step-time", func() int64 { return medianStepNs(in.Trace) })
	}
	return 0
}

// trimSide keeps a side's n largest operators and sites: a diff names the
// largest movers, and a digest must stay small.
func trimSide(s *diff.Side, n int) *diff.Side {
	keep := func(m map[string]int64) map[string]int64 {
		if len(m) <= n {
			return m
		}
		type kv struct {
			k string
			v int64
		}
		var all []kv
		for k, v := range m {
			all = append(all, kv{k, v})
		}
		slices.SortFunc(all, func(a, b kv) int {
			av, bv := max(a.v, -a.v), max(b.v, -b.v)
			if av != bv {
				if av > bv {
					return -1
				}
				return 1
			}
			if a.k < b.k {
				return -1
			}
			return 1
		})
		out := make(map[string]int64, n)
		for _, e := range all[:n] {
			out[e.k] = e.v
		}
		return out
	}
	s.Operators, s.SiteAlloc, s.SiteLive = keep(s.Operators), keep(s.SiteAlloc), keep(s.SiteLive)
	if len(s.Suspects) > n {
		s.Suspects = s.Suspects[:n]
	}
	return s
}

// digestFindings are a digest's findings under the rules rs: a rule left
// out (disabled) drops its findings, a configured severity replaces the
// built-in one. Thresholds were applied when the digest was made.
func digestFindings(rs []Rule, in *Input) []Finding {
	var out []Finding
	for _, f := range in.Digest.Findings {
		i := slices.IndexFunc(rs, func(r Rule) bool { return r.ID == f.Rule })
		if i < 0 {
			continue
		}
		g := f.Finding
		g.Severity = rs[i].Severity
		if f.BelowThreshold && g.Severity > Warning {
			g.Severity = Warning
		}
		g.belowThreshold = f.BelowThreshold
		if g.Source == "" || g.Source == in.Digest.Verdict.Name {
			g.Source = in.Source
		}
		out = append(out, g)
	}
	return out
}

// hasGPUSteps: the trace has GPU activity and ProfilerStep windows (what
// the checklist's GPU-timeline items need).
func (in *Input) hasGPUSteps() bool {
	if in.IsDigest() {
		return in.Digest.GPUActivity
	}
	return in.Has(SourceTrace) && len(deviceBusy(in)) > 0 && len(stepWindows(in).List) > 0
}

// downsampleCategories keeps at most n instants of tl, chosen on the
// total over its categories so that its peaks stay.
func downsampleCategories(tl *exported.Timeline, n int) *exported.Timeline {
	total := make([]int64, len(tl.Times))
	for _, row := range tl.Bytes {
		for i, b := range row {
			if i < len(total) {
				total[i] += b
			}
		}
	}
	idx := memtimeline.DownsampleIndices(total, n)
	if idx == nil {
		return tl
	}
	out := &exported.Timeline{Format: tl.Format, Categories: tl.Categories, HasPreexisting: tl.HasPreexisting, Times: make([]int64, len(idx))}
	for j, i := range idx {
		out.Times[j] = tl.Times[i]
	}
	for _, row := range tl.Bytes {
		r := make([]int64, len(idx))
		for j, i := range idx {
			if i < len(row) {
				r[j] = row[i]
			}
		}
		out.Bytes = append(out.Bytes, r)
	}
	return out
}

// traceCharts are the trace's charts, downsampled.
func traceCharts(in *Input) []MemoryChart {
	t := in.Trace
	tls := memtimeline.TraceTimelines(t)
	var out []MemoryChart
	for i, spec := range TraceCharts(t) {
		if i < len(tls) {
			spec.Holders = memtimeline.HolderSamples(t, in.Attribution(), in.Lifetimes(-1), tls[i].Device, holderSamples, 3)
		}
		// The same instants for both lines (they share their times): those
		// that keep allocated's peaks and troughs and those that keep
		// reserved's.
		a, r := spec.Allocated, spec.Reserved
		if ia := memtimeline.DownsampleIndices(a.V, TimelinePoints/2); ia != nil && len(r.V) == len(a.V) {
			idx := mergeSorted(ia, memtimeline.DownsampleIndices(r.V, TimelinePoints/2))
			spec.Allocated, spec.Reserved = a.Pick(idx), r.Pick(idx)
		} else if ia := memtimeline.DownsampleIndices(a.V, TimelinePoints); ia != nil && len(r.V) == 0 {
			// Reserved not recorded: allocated alone, in as many points.
			spec.Allocated = a.Pick(ia)
		}
		if slices.Equal(spec.Reserved.T, spec.Allocated.T) {
			spec.Reserved.T = nil // the same instants: kept once (RestoreCharts)
		}
		out = append(out, spec)
	}
	return out
}

// mergeSorted is the union of two increasing index lists (b may be nil).
func mergeSorted(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i >= len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// RestoreCharts gives back what a digest's charts keep once: the reserved
// line's instants, the allocated line's.
func (d *Digest) RestoreCharts() {
	for i := range d.Charts {
		c := &d.Charts[i]
		if c.Reserved.T == nil && len(c.Reserved.V) == len(c.Allocated.T) {
			c.Reserved.T = c.Allocated.T
		}
	}
}
