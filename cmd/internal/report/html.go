package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report/chart"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules"
)

//go:embed templates/report.html.tmpl
var reportTemplateText string

// The template escapes every name it prints (op names like
// "void at::native::...<...>" and stack paths come from untrusted files);
// charts come pre-escaped from chart.Snippet.
var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"bytes":      memtimeline.FormatBytes,
	"join":       func(s []string) string { return strings.Join(s, "\n") },
	"checkClass": checklistStatusClass,
	// last is a stack's innermost frame, the summary of its <details>.
	"last":    chrometrace.InnermostFrame,
	"base":    filepath.Base,
	"shortOp": shortOp,
	"charts":  func(group string, c []reportChart) reportChartGroup { return reportChartGroup{group, c} },
}).Parse(reportTemplateText))

type reportKV struct{ Key, Value string }

type reportChart struct {
	Title string
	HTML  template.HTML
}

type reportTable struct {
	Title  string
	Header []string
	Rows   [][]string
}

type reportInput struct {
	Source    string
	Kind      rules.SourceKind
	Summary   []reportKV
	Charts    []reportChart
	Leak      *rules.LeakReport
	Operators []OperatorRow
	Sites     []SiteRow
	Tables    []reportTable
	Findings  []rules.Finding

	// ChartsAbove names the verdict whose block shows this input's charts.
	ChartsAbove string
}

type reportPage struct {
	Title   string
	Version string
	Verdict string
	Failed  bool
	Echarts template.HTML
	// Answers are the verdict blocks, one per run and rank; Findings all
	// findings (one per leak), most severe first. Both lead the page.
	Answers []reportAnswer
	// CrossRank compares the ranks (nil with fewer than two); CrossRows
	// are the rows shown (the outliers first), CrossHidden those left out.
	CrossRank   *rules.CrossRank
	CrossRows   []reportRankRow
	CrossHidden int
	Findings    []rules.Finding
	Inputs      []reportInput
}

// reportRankRow is one row of the cross-rank table.
type reportRankRow struct {
	rules.RankRow
	PerStep, Peak, StepTime, Differs string
}

// reportAnswer is one run's (or rank's) verdict block.
type reportAnswer struct {
	Status string
	Name   string
	Files  []string
	Lines  []reportLine
	// Bar is the peak split by category (a stacked bar); PeakLines and
	// PeakOps the top holders at the peak; PeakNote says it is estimated.
	Bar       []reportBarSegment
	PeakTitle string
	PeakLines []memtimeline.Share
	PeakOps   []memtimeline.Share
	PeakNote  string
	// PeakEstimated: the bar is the estimate (else torch's own split).
	PeakEstimated bool
	TorchBar      []reportBarSegment
	TorchNote     string
	// OOMs show what was alive at each out-of-memory a trace recorded.
	OOMs     []reportOOM
	Evidence []rules.LeakEvidence
	// Memory is the memory over time of MemoryOf, shown below the lines.
	Memory   []reportChart
	MemoryOf string
	Charts   []reportChart
	// TimelineNotes say what the combined timeline could not place.
	TimelineNotes []string
	// Checklist is the field's checklist for this run and rank, shown in
	// its own section after the verdict block (checklist.go).
	Checklist []rules.CheckItem
}

type reportOOM struct {
	Title string
	Bar   []reportBarSegment
	Lines []memtimeline.Share
}

type reportLine struct {
	Label, Text string
	// Chain is the holding chain, outermost first, shown collapsed.
	Chain []string
}

type reportBarSegment struct {
	Name    string
	Bytes   int64
	Percent string // CSS width, e.g. "41.2"
}

// writePage writes the evaluation as the HTML page.
func (r *Report) writePage(w io.Writer) error {
	ev := r.Eval
	page := reportPage{Title: "torchmem memory report", Version: r.Version, Echarts: chart.EchartsScript()}
	for i := range ev.Tables {
		in := ev.Tables[i].Input
		ri, err := buildReportInput(fmt.Sprintf("in%d_", i), &ev.Tables[i], ev.FindingsFor(in.Source), r.Top)
		if err != nil {
			return fmt.Errorf("%s: %w", in.Source, err)
		}
		page.Inputs = append(page.Inputs, ri)
	}
	page.Findings = ev.Findings
	for i, v := range ev.Verdicts {
		var run *rules.MemoryChart
		if i < len(ev.RunCharts) {
			run = ev.RunCharts[i]
		}
		a, err := buildReportAnswer(fmt.Sprintf("v%d_", i), v, run)
		if err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
		a.Checklist = ev.Checklists[i].Items
		page.Answers = append(page.Answers, a)
	}
	if cr := ev.CrossRank; cr != nil {
		page.CrossRank = cr
		rows, hidden := crossRankRows(cr)
		for _, r := range rows {
			page.CrossRows = append(page.CrossRows, reportRankRow{RankRow: r, PerStep: memtimeline.FormatBytes(r.BytesPerStep),
				Peak: peakCell(r.PeakAllocatedBytes), StepTime: stepTime(r.StepTimeNs), Differs: strings.Join(r.Differs, "; ")})
		}
		page.CrossHidden = hidden
	}
	liftMemoryCharts(&page, ev.Verdicts, ev.Inputs)
	page.Verdict = VerdictLine(ev)
	page.Failed = !ev.Passed()
	return reportTemplate.Execute(w, page)
}

// buildReportAnswer renders one verdict for the page's top.
func buildReportAnswer(idPrefix string, v rules.Verdict, run *rules.MemoryChart) (reportAnswer, error) {
	a := reportAnswer{Status: v.Status(), Name: v.Name, Evidence: v.Leak.Evidence}
	a.Files = sourceNames(v.Sources)
	l := reportLine{Label: strings.ToUpper(v.Leak.Verdict), Text: leakText(v.Leak, false)}
	if len(v.Leak.Holding) > 1 {
		l.Chain = v.Leak.Holding
	}
	a.Lines = append(a.Lines, l)
	if v.Leak.Verdict == rules.LeakVerdictLeak || v.Leak.Agreement != "" {
		a.Lines = append(a.Lines, reportLine{Label: "", Text: evidenceLine(v.Leak)})
	}
	for _, o := range v.OOMs {
		a.Lines = append(a.Lines, reportLine{Label: "OOM", Text: oomLine(o)})
		if c := o.Composition; c != nil && c.AllocatedBytes > 0 {
			t := fmt.Sprintf("What was alive when %s failed: %s allocated", memtimeline.FormatBytes(o.RequestBytes), memtimeline.FormatBytes(c.AllocatedBytes))
			if c.Step != "" {
				t += " at " + c.Step
			}
			a.OOMs = append(a.OOMs, reportOOM{Title: t, Bar: barSegments(c.ByCategory), Lines: c.ByLine[:min(5, len(c.ByLine))]})
		}
	}
	if v.Frag != nil {
		a.Lines = append(a.Lines, reportLine{Label: "FRAG", Text: fragLine(v.Frag)})
		if v.Frag.Retries != "" {
			a.Lines = append(a.Lines, reportLine{Label: "RETRY", Text: v.Frag.Retries})
		}
	}
	xl, xt := answerEntries(v)
	for i := range xl {
		a.Lines = append(a.Lines, reportLine{Label: xl[i], Text: xt[i]})
	}
	labels, texts := gpuEntries(v.GPU)
	for i := range labels {
		a.Lines = append(a.Lines, reportLine{Label: labels[i], Text: texts[i]})
	}
	if v.Host != nil {
		a.Lines = append(a.Lines, reportLine{Label: "HOST", Text: hostLine(v.Host)})
	}
	if p := v.Peak; p != nil {
		a.Lines = append(a.Lines, reportLine{Label: "PEAK", Text: peakLine(p)})
		if c := p.Composition; c != nil && c.AllocatedBytes > 0 {
			a.PeakTitle = fmt.Sprintf("What fills the peak: %s allocated", memtimeline.FormatBytes(c.AllocatedBytes))
			if c.Step != "" {
				a.PeakTitle += " at " + c.Step
			}
			if c.Phase != "" {
				a.PeakTitle += " (" + c.Phase + ")"
			}
			a.Bar = barSegments(c.ByCategory)
			a.PeakEstimated = c.Estimated
			if len(c.Torch) > 0 && c.Estimated {
				a.TorchBar = barSegments(c.Torch)
				a.TorchNote = fmt.Sprintf("torch's own categories from %s at the same moment; the estimate above agrees %.0f%% (1 - total variation distance of the shares, leaving out allocator blocks that are no tensor)", filepath.Base(p.TorchSource), 100*c.Agreement)
			}
			a.PeakLines = c.ByLine[:min(5, len(c.ByLine))]
			a.PeakOps = c.ByOperator[:min(5, len(c.ByOperator))]
			a.PeakNote = c.Note
		}
	}
	for _, in := range v.Inputs {
		if in.IsDigest() {
			a.TimelineNotes = append(a.TimelineNotes, "read from summaries: the run on one timeline (step log, profiled windows, snapshot history) needs the files themselves; each summary's own chart is below")
			break
		}
	}
	// One timeline for the run: the step log over every step, each
	// profiled window marked with its trace, the snapshot's history.
	if run != nil {
		a.TimelineNotes = append(a.TimelineNotes, run.Notes...)
		if len(run.Lines) >= 2 { // two sources or more share the clock
			spec := specOf(*run, idPrefix+"run")
			spec.HeightPx = 360
			h, err := chart.Snippet(spec)
			if err != nil {
				return a, err
			}
			a.Charts = append(a.Charts, reportChart{Title: spec.Title, HTML: h})
		}
	}
	return a, nil
}

// barSegments turns a split into a stacked bar's segments.
func barSegments(shares []memtimeline.Share) []reportBarSegment {
	var total int64
	for _, k := range shares {
		total += max(0, k.Bytes)
	}
	var out []reportBarSegment
	for _, k := range shares {
		if k.Bytes <= 0 || total == 0 {
			continue
		}
		out = append(out, reportBarSegment{Name: k.Name, Bytes: k.Bytes, Percent: fmt.Sprintf("%.2f", 100*float64(k.Bytes)/float64(total))})
	}
	return out
}

func buildReportInput(idPrefix string, t *rules.Table, fs []rules.Finding, top int) (reportInput, error) {
	in := t.Input
	ri := reportInput{Source: in.Source, Findings: fs}
	switch {
	case in.Is(rules.SourceTrace):
		ri.Kind = rules.SourceTrace
		ri.Summary = traceSummaryKV(in.Trace, t.Summary)
		for i, c := range t.Charts {
			if err := ri.addChart(specOf(c, fmt.Sprintf("%s%d", idPrefix, i))); err != nil {
				return ri, err
			}
		}
		ops := slices.DeleteFunc(slices.Clone(t.Operators), func(o chrometrace.OperatorStats) bool { return o.OnDevice })
		for _, r := range ops[:topN(top, len(ops))] {
			ri.Operators = append(ri.Operators, OperatorRow{Name: r.Name, Calls: r.Calls, SelfDeviceMemoryBytes: r.SelfDeviceMemory, DeviceMemoryBytes: r.DeviceMemory, Allocs: r.Allocs})
		}
		for _, st := range t.Sites[:topN(top, len(t.Sites))] {
			ri.Sites = append(ri.Sites, SiteRow{Frames: st.Frames, Operator: st.Operator, ForwardOperator: st.ForwardOp, AllocBytes: st.AllocBytes, LiveBytesAtEnd: st.LiveBytesAtEnd, LiveBytesAtPeak: st.LiveBytesAtPeak})
		}
		ri.Leak = t.Leak
	case in.Has(rules.SourceSnapshot):
		ri.Kind = rules.SourceSnapshot
		rep := t.Snapshot
		st := rep.Stats
		ri.Summary = snapshotSummaryKV(st, len(rep.OOMs))
		for _, c := range t.Charts {
			if err := ri.addChart(specOf(c, fmt.Sprintf("%s%d", idPrefix, c.Device))); err != nil {
				return ri, err
			}
		}
		ri.Leak = t.Leak
		var rows [][]string
		for _, f := range rep.SegmentFills[:topN(top, len(rep.SegmentFills))] {
			rows = append(rows, []string{fmt.Sprintf("%#x", f.Address), f.SegmentType, memtimeline.FormatBytes(f.TotalSize), memtimeline.FormatBytes(f.AllocatedBytes), f.Bar})
		}
		ri.Tables = append(ri.Tables, reportTable{Title: fmt.Sprintf("Largest segments, with a fill map: each cell is 1/%d of the segment; '#' full, '1'-'9' tenths in use, '0' under a tenth, '.' free", snapshot.DefaultBarWidth), Header: []string{"Address", "Pool", "Size", "Allocated", "Fill"}, Rows: rows})
	case t.SnapshotStats != nil: // a snapshot's summary
		ri.Kind = rules.SourceSnapshot
		ri.Summary = append(snapshotSummaryKV(*t.SnapshotStats, len(in.Digest.Verdict.OOMs)),
			reportKV{"From", "a summary: the segment table and the history chart need the snapshot itself"})
		ri.Leak = t.Leak
	case in.IsDigest() && in.Timeline == nil:
		ri.Kind = in.Kind
		for _, e := range in.Digest.Verdict.Leak.Evidence {
			ri.Summary = append(ri.Summary, reportKV{"Leak evidence", fmt.Sprintf("%s: %s per step; %s", e.Verdict, memtimeline.FormatBytes(e.BytesPerStep), e.Reason)})
		}
	case in.Timeline != nil:
		ri.Kind = kindTimeline
		ri.Summary = []reportKV{{"Points", fmt.Sprint(in.Timeline.Len())}, {"Peak total", memtimeline.FormatBytes(t.TimelinePeak)}}
		for _, c := range t.Charts {
			if err := ri.addChart(specOf(c, idPrefix+"0")); err != nil {
				return ri, err
			}
		}
	case in.Has(rules.SourceSMI):
		ri.Kind = rules.SourceSMI
		ri.Summary = []reportKV{{"GPUs", fmt.Sprint(len(in.SMI.GPUs))}, {"Rows", fmt.Sprint(in.SMI.Rows)}}
		for _, c := range t.Charts {
			if err := ri.addChart(specOf(c, fmt.Sprintf("%s%d", idPrefix, c.Device))); err != nil {
				return ri, err
			}
		}
	case in.StepLog != nil: // a steps log, or memory_summary() tables as steps
		ri.Kind = rules.SourceSteps
		for _, s := range t.Steps.Series {
			ri.Summary = append(ri.Summary, reportKV{"Device " + s.Device, fmt.Sprintf("%s: %s per step; %s", s.Verdict, memtimeline.FormatBytes(s.BytesPerStep), s.Reason)})
		}
	}
	return ri, nil
}

func (ri *reportInput) addChart(spec chart.Spec) error {
	h, err := chart.Snippet(spec)
	if err != nil {
		return err
	}
	ri.Charts = append(ri.Charts, reportChart{Title: spec.Title, HTML: h})
	return nil
}

// specOf is the chart of one GPU's memory (rules.MemoryChart's series,
// bands and markers), as element id.
func specOf(c rules.MemoryChart, id string) chart.Spec {
	spec := chart.Spec{ID: id, Title: c.Title, StartNs: c.StartNs, Allocated: c.Allocated, Reserved: c.Reserved, Holders: c.Holders, Explorer: c.Explorer, Categories: c.Categories,
		Lines: c.Lines, PointLines: c.PointLines}
	for _, st := range c.Steps {
		spec.Steps = append(spec.Steps, chart.StepSpan{Name: st.Name, StartNs: st.StartNs, EndNs: st.EndNs})
	}
	for _, m := range c.Markers {
		spec.Markers = append(spec.Markers, chart.Marker{Name: m.Name, TNs: m.TNs, Bytes: m.Bytes})
	}
	return spec
}

// snapshotSummaryKV is an allocator snapshot's summary on the page, from
// the snapshot or its summary.
func snapshotSummaryKV(st snapshot.Stats, ooms int) []reportKV {
	return []reportKV{
		{"Reserved", fmt.Sprintf("%s (%d segments: %d small, %d large, %d expandable)", memtimeline.FormatBytes(st.ReservedBytes), st.Segments, st.SmallSegments, st.LargeSegments, st.ExpandableSegments)},
		{"Allocated", memtimeline.FormatBytes(st.AllocatedBytes)},
		{"Inactive split", memtimeline.FormatBytes(st.InactiveSplitBytes) + " (free inside partly used segments)"},
		{"Largest free block", memtimeline.FormatBytes(st.LargestFreeBlock)},
		{"Out-of-memory events", fmt.Sprint(ooms)},
	}
}

func traceSummaryKV(t *chrometrace.Trace, s chrometrace.Summary) []reportKV {
	kv := []reportKV{{"Events", fmt.Sprintf("%d over %s", s.Events, formatNS(s.DurationNs))}}
	if s.GPU != "" {
		kv = append(kv, reportKV{"GPU", fmt.Sprintf("%s, %s, CUDA %s", s.GPU, memtimeline.FormatBytes(s.GPUMemoryBytes), s.CUDARuntime)})
	}
	if s.Rank >= 0 {
		kv = append(kv, reportKV{"Rank", fmt.Sprintf("%d of %d", s.Rank, s.WorldSize)})
	}
	kv = append(kv, reportKV{"Steps", fmt.Sprintf("%d (ProfilerStep#%d..#%d)", s.Steps, s.FirstStep, s.LastStep)})
	kv = append(kv, reportKV{"Peak allocated", memtimeline.FormatBytes(s.PeakAllocatedBytes)}, reportKV{"Peak reserved", memtimeline.FormatBytes(s.PeakReservedBytes)})
	rec := fmt.Sprintf("profile_memory %v, with_stack %v, record_shapes %v", s.ProfileMemory, s.WithStack, s.RecordShapes)
	kv = append(kv, reportKV{"Recorded", rec})
	if t == nil && s.Truncated {
		kv = append(kv, reportKV{"Warning", "truncated: the report covers what was read"})
	}
	if t != nil && t.Truncated != nil {
		kv = append(kv, reportKV{"Warning", fmt.Sprintf("truncated at byte %d: the report covers what was read", t.Truncated.Offset)})
	}
	return kv
}

// writeDiffPage writes diff's HTML page: both runs' allocated memory on
// one axis aligned at the first profiled step, beside the movers' tables.
func writeDiffPage(w io.Writer, d *rules.Diff, verdict string, failed bool, aligned *rules.MemoryChart, version string) error {
	page := reportPage{Title: "torchmem diff: " + d.Base + " → " + d.Head, Version: version, Echarts: chart.EchartsScript()}
	page.Verdict, page.Failed = verdict, failed
	ri := reportInput{Source: d.Base + " → " + d.Head, Kind: "diff"}
	for _, m := range d.Metrics {
		ri.Summary = append(ri.Summary, reportKV{m.Metric, fmt.Sprintf("%s → %s (%s)", memtimeline.FormatBytes(m.Base), memtimeline.FormatBytes(m.Head), signed(m.Delta))})
	}
	ri.Summary = append(ri.Summary, reportKV{"leak verdict", d.BaseVerdict + " → " + d.HeadVerdict})
	if aligned != nil {
		if err := ri.addChart(specOf(*aligned, "diff0")); err != nil {
			return err
		}
	}
	table := func(title string, ms []rules.DiffMover) {
		var rows [][]string
		for _, m := range ms {
			rows = append(rows, []string{m.Name, memtimeline.FormatBytes(m.Base), memtimeline.FormatBytes(m.Head), signed(m.Delta)})
		}
		if len(rows) > 0 {
			ri.Tables = append(ri.Tables, reportTable{Title: title, Header: []string{"Name", "Base", "Head", "Change"}, Rows: rows})
		}
	}
	table("Operators whose Self CUDA Mem moved most", d.Operators)
	table("Allocation sites whose allocated bytes moved most", d.SitesAlloc)
	table("Allocation sites whose bytes alive at the end moved most", d.SitesLive)
	page.Inputs = []reportInput{ri}
	return reportTemplate.Execute(w, page)
}
