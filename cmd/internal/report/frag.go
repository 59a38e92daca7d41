package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules"
)

// fragJSON is the --format json document: the report with the file it is about.
type fragJSON struct {
	Trace string `json:"trace"`
	rules.FragReport
	// Costs and Cost are the evaluation's: what fragmentation cost.
	Costs []string `json:"costs"`
	Cost  string   `json:"cost,omitempty"`
}

// stepOffset places a time on the report's step clock: "ProfilerStep#3 +81.2 ms".
func stepOffset(rep *rules.FragReport, step string, ts int64) string {
	for _, s := range rep.Steps {
		if s.Name == step {
			return fmt.Sprintf("%s +%s", step, formatNS(ts-s.StartNS))
		}
	}
	return step
}

// formatNS prints nanoseconds as every duration prints
// (memtimeline.FormatDuration).
func formatNS(ns int64) string { return memtimeline.FormatDuration(time.Duration(ns)) }

// fragText writes one fragmentation report's parts in text or Markdown.
type fragText struct {
	w      io.Writer
	format string
	md     bool
}

func (f fragText) heading(s string) {
	if f.md {
		fmt.Fprintf(f.w, "#### %s\n\n", s)
	} else {
		fmt.Fprintf(f.w, "%s\n", s)
	}
}

func (f fragText) bullet(s string) {
	if f.md {
		fmt.Fprintf(f.w, "- %s\n", mdEscape(s))
	} else {
		fmt.Fprintf(f.w, "  - %s\n", s)
	}
}

func (f fragText) list(title string, items []string) {
	if len(items) == 0 {
		return
	}
	if f.md {
		fmt.Fprintf(f.w, "**%s**\n\n", title)
	} else {
		fmt.Fprintln(f.w, title)
	}
	for _, it := range items {
		f.bullet(it)
	}
	if f.md {
		fmt.Fprintln(f.w)
	}
}

// table writes a table and the blank line after it.
func (f fragText) table(tw table.Writer) {
	Table(f.w, tw, f.format)
	fmt.Fprintln(f.w)
}

// writeFragReport writes a trace's fragmentation report: the verdict and
// why, then its tables (summary, sizes, steps, reserved given back, the
// sites of small allocations and of churn).
func writeFragReport(w io.Writer, path string, rep *rules.FragReport, format string) {
	f := fragText{w: w, format: format, md: format == Markdown}
	if !f.verdict(path, rep) {
		return
	}
	f.summary(rep)
	f.sizes(rep)
	f.steps(rep)
	f.drops(rep)
	f.sites(fmt.Sprintf("Top sites of small allocations (<= %s)", memtimeline.FormatBytes(rep.SmallAllocs.MaxBytes)), rep.SmallAllocs.TopSites, true)
	f.sites("Where cudaMalloc/cudaFree were called after the first step (churn)", rep.SegmentCalls.TopSites, false)
}

// verdict writes the file, the verdict and why; false when the verdict
// is unknown (its reason is all there is to say).
func (f fragText) verdict(path string, rep *rules.FragReport) bool {
	w := f.w
	if f.md {
		fmt.Fprintf(w, "### %s\n\n**Verdict: %s**\n\n", mdEscape(path), rep.Verdict)
	} else {
		fmt.Fprintf(w, "%s\nVerdict: %s\n", path, strings.ToUpper(rep.Verdict))
	}
	if rep.Verdict == rules.FragVerdictUnknown {
		if f.md {
			fmt.Fprintf(w, "%s\n", mdEscape(rep.Reason))
		} else {
			fmt.Fprintf(w, "%s\n", rep.Reason)
		}
		return false
	}
	if rep.Verdict == rules.FragVerdictFragmented {
		f.list("Why:", rep.Reasons)
	} else {
		f.list("Checked:", rep.Reasons)
	}
	f.list("What to try:", rep.Advice)
	if !f.md {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Sizes in binary units as torch prints them (1 MB = 1 MiB); --format json gives exact bytes.")
	fmt.Fprintln(w)
	return true
}

// summary is the table of the allocator's traffic: allocations, small
// ones, the reserved-minus-allocated gap, segment misses, cudaMalloc and
// cudaFree, churn.
func (f fragText) summary(rep *rules.FragReport) {
	f.heading("Summary")
	tw := NewTable()
	tw.AppendHeader(table.Row{"", "Value", "Note"})
	sa := rep.SmallAllocs
	tw.AppendRow(table.Row{"GPU allocations", fmt.Sprintf("%d (%s)", rep.Allocs, memtimeline.FormatBytes(rep.AllocBytes)), fmt.Sprintf("%d frees (%s)", rep.Frees, memtimeline.FormatBytes(rep.FreedBytes))})
	perStep := fmt.Sprintf("%.1f per step", sa.PerStep)
	if rep.WholeWindow {
		perStep = "no ProfilerStep annotations"
	}
	tw.AppendRow(table.Row{"Small allocations (<= " + memtimeline.FormatBytes(sa.MaxBytes) + ")", fmt.Sprintf("%d (%s)", sa.Count, memtimeline.FormatBytes(sa.Bytes)), fmt.Sprintf("%s, %.1f%% of allocations", perStep, 100*sa.Fraction)})
	gapRow := func(name string, p *rules.FragGapPoint, note string) {
		if p == nil {
			return
		}
		tw.AppendRow(table.Row{name, fmt.Sprintf("%s (%.1f%% of reserved)", memtimeline.FormatBytes(p.Gap), 100*p.Fraction),
			fmt.Sprintf("%s allocated, %s reserved at %s%s", memtimeline.FormatBytes(p.Allocated), memtimeline.FormatBytes(p.Reserved), stepOffset(rep, p.Step, p.TS), note)})
	}
	gapRow("Reserved - allocated at peak allocated", rep.GapAtPeak, "")
	gapRow("Largest reserved - allocated", rep.LargestGap, "")
	tw.AppendRow(table.Row{"New segments while their pool held the bytes idle", fmt.Sprint(rep.FragmentedMisses), memtimeline.FormatBytes(rep.FragmentedMissBytes) + " reserved: memory held but not in one piece for the request"})
	for _, p := range rep.Pools {
		tw.AppendRow(table.Row{fmt.Sprintf("%s pool", strings.ToUpper(p.Pool[:1])+p.Pool[1:]), fmt.Sprintf("%s, %s", count(p.Misses, "segment miss", "segment misses"), memtimeline.FormatBytes(p.MissBytes)),
			fmt.Sprintf("at the end: %s in segments made in the window, at least %s idle", memtimeline.FormatBytes(p.SegmentBytes), memtimeline.FormatBytes(p.IdleAtLeastBytes))})
	}
	sc := rep.SegmentCalls
	source := "from CUDA runtime events"
	if sc.Source == "reserved" {
		source = "inferred from reserved memory (no CUDA runtime events)"
	}
	tw.AppendRow(table.Row{"cudaMalloc", fmt.Sprintf("%d (%s)", sc.CudaMalloc, formatNS(sc.CudaMallocNS)), fmt.Sprintf("%d after the first step, %s", sc.SteadyCudaMalloc, source)})
	tw.AppendRow(table.Row{"cudaFree", fmt.Sprintf("%d (%s)", sc.CudaFree, formatNS(sc.CudaFreeNS)), fmt.Sprintf("%d after the first step, %d inside torch.cuda.empty_cache()", sc.SteadyCudaFree, sc.EmptyCacheFrees)})
	tw.AppendRow(table.Row{"Churn after the first step", fmt.Sprintf("%.1f calls per step", sc.ChurnPerStep), "cudaFree, and cudaMalloc in steps without a new peak"})
	if rep.OOMRetryCalls+rep.RefillMallocs > 0 {
		tw.AppendRow(table.Row{"Out-of-memory retry", fmt.Sprintf("%d calls, %d refill cudaMalloc", rep.OOMRetryCalls, rep.RefillMallocs), "the allocator freeing its cache to retry, and growing it back after: not churn"})
	}
	f.table(tw)
}

// sizes is the allocation size histogram by the allocator's size classes.
func (f fragText) sizes(rep *rules.FragReport) {
	f.heading("Allocation sizes (rounded blocks)")
	tw := NewTable()
	tw.AppendHeader(table.Row{"Block size", "Allocator pool", "Allocations", "Share", "Bytes"})
	for _, h := range rep.Histogram {
		tw.AppendRow(table.Row{h.Label, h.Pool, h.Count, fmt.Sprintf("%.1f%%", 100*h.Fraction), memtimeline.FormatBytes(h.Bytes)})
	}
	tw.SetColumnConfigs([]table.ColumnConfig{{Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}, {Number: 5, Align: text.AlignRight}})
	f.table(tw)
}

// rows writes one of the report's tables of n items, row(i) the i-th's
// row, under its heading; nothing when there are none. align configures
// the columns (nil: left).
func (f fragText) rows(title string, header table.Row, n int, row func(i int) table.Row, align []table.ColumnConfig) {
	if n == 0 {
		return
	}
	f.heading(title)
	tw := NewTable()
	tw.AppendHeader(header)
	for i := range n {
		tw.AppendRow(row(i))
	}
	if align != nil {
		tw.SetColumnConfigs(align)
	}
	f.table(tw)
}

// steps is the traffic per ProfilerStep.
func (f fragText) steps(rep *rules.FragReport) {
	f.rows("Per step", table.Row{"Step", "Allocs", "Frees", "Churned", "Small", "Peak allocated", "Peak reserved", "cudaMalloc", "cudaFree", "Returned", ""},
		len(rep.Steps), func(i int) table.Row {
			s := &rep.Steps[i]
			note := []string{}
			if !s.Steady {
				note = append(note, "first step")
			}
			if s.NewPeak && s.Steady && s.CudaMalloc > 0 {
				note = append(note, "new peak: growth")
			}
			if s.ChurnCalls > 0 {
				note = append(note, fmt.Sprintf("%d churn calls", s.ChurnCalls))
			}
			return table.Row{s.Name, s.Allocs, s.Frees, memtimeline.FormatBytes(s.AllocBytes + s.FreedBytes), s.SmallAllocs,
				memtimeline.FormatBytes(s.PeakAllocated), memtimeline.FormatBytes(s.PeakReserved),
				callsCell(s.CudaMalloc, s.CudaMallocNS), callsCell(s.CudaFree, s.CudaFreeNS),
				memtimeline.FormatBytes(s.ReservedReturnedBytes), strings.Join(note, ", ")}
		}, rightAligned(2, 10))
}

// drops are the times reserved memory was given back.
func (f fragText) drops(rep *rules.FragReport) {
	f.rows("Reserved memory given back (segments freed)", table.Row{"When", "Returned", "Reserved after", "cudaFree calls", "By"},
		len(rep.ReservedDrops), func(i int) table.Row {
			d := &rep.ReservedDrops[i]
			return table.Row{stepOffset(rep, d.Step, d.TS), memtimeline.FormatBytes(d.Bytes), memtimeline.FormatBytes(d.ReservedAfter), d.CudaFreeCalls, d.Cause()}
		}, nil)
}

// sites is a table of code sites (with their bytes when bytes is set).
func (f fragText) sites(title string, sites []rules.FragCodeSite, bytes bool) {
	if len(sites) == 0 {
		return
	}
	f.heading(title)
	tw := NewTable()
	row := table.Row{"Count", "Per step", "Share"}
	if bytes {
		row = append(row, "Bytes")
	}
	tw.AppendHeader(append(row, "Python stack (innermost last)", "Operator"))
	sep := "\n"
	if f.format != Text {
		sep = " → "
	}
	for _, s := range sites {
		stack := slices.Clone(s.Stack)
		if len(stack) == 0 {
			stack = []string{chrometrace.NoPythonStack}
		}
		op := s.Operator
		if s.ForwardOp != "" {
			op += " (backward of " + s.ForwardOp + ")"
		}
		r := table.Row{s.Count, fmt.Sprintf("%.1f", s.PerStep), fmt.Sprintf("%.1f%%", 100*s.Fraction)}
		if bytes {
			r = append(r, memtimeline.FormatBytes(s.Bytes))
		}
		tw.AppendRow(append(r, strings.Join(stack, sep), strings.ReplaceAll(op, " > ", sep+"> ")))
	}
	numeric := 3
	if bytes {
		numeric = 4
	}
	tw.SetColumnConfigs(rightAligned(1, numeric))
	f.table(tw)
}

// rightAligned right-aligns columns from to to (1-based, inclusive).
func rightAligned(from, to int) []table.ColumnConfig {
	var cfg []table.ColumnConfig
	for c := from; c <= to; c++ {
		cfg = append(cfg, table.ColumnConfig{Number: c, Align: text.AlignRight})
	}
	return cfg
}

func callsCell(n, ns int64) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", n, formatNS(ns))
}

// fragSummaryDocJSON is frag's JSON for a memory_summary() log.
type fragSummaryDocJSON struct {
	File    string            `json:"file"`
	Verdict string            `json:"verdict"`
	Reason  string            `json:"reason"`
	Devices []memsummary.Frag `json:"devices"`
}

// writeFrag writes each input's report: a trace's allocator traffic, a
// snapshot's layout, a memory_summary() log's figures.
func (r *Report) writeFrag(w io.Writer) error {
	return EachInput(w, r.Format, r.Eval.Tables, func(w io.Writer, t rules.Table) error {
		switch {
		case t.Input.Has(rules.SourceSnapshot):
			return writeFragSnapshot(w, &t, r.Format)
		case t.Input.Has(rules.SourceMemSummary):
			return writeFragSummary(w, &t, r.Format)
		}
		return writeFragTrace(w, &t, r.Format)
	})
}

func writeFragTrace(w io.Writer, t *rules.Table, format string) error {
	in, rep := t.Input, *t.Frag
	costs, cost := []string{}, ""
	if a := t.FragAnswer; a != nil && rep.Verdict != rules.FragVerdictUnknown {
		// The verdict is the evaluation's, by what fragmentation cost;
		// the trace's signals are the measurements behind it.
		rep.Verdict, cost = a.Verdict, a.Cost
		if a.Costs != nil {
			costs = a.Costs
		}
		if cost != "" {
			word := "Cost: "
			if a.Verdict != rules.FragVerdictFragmented {
				word = "No cost: "
			}
			rep.Reasons = append([]string{word + cost}, rep.Reasons...)
		}
	}
	if format == JSON {
		return WriteJSON(w, fragJSON{Trace: in.Source, FragReport: rep, Costs: costs, Cost: cost})
	}
	writeFragReport(w, in.Source, &rep, format)
	return nil
}

// fragSnapshotJSON is frag's JSON for an allocator snapshot.
type fragSnapshotJSON struct {
	File                  string                     `json:"file"`
	Verdict               string                     `json:"verdict"`
	Reason                string                     `json:"reason"`
	ReservedBytes         int64                      `json:"reserved_bytes"`
	AllocatedBytes        int64                      `json:"allocated_bytes"`
	ActiveBytes           int64                      `json:"active_bytes"`
	InactiveSplitBytes    int64                      `json:"inactive_split_bytes"`
	LargestFreeBlockBytes int64                      `json:"largest_free_block_bytes"`
	FreeBytes             int64                      `json:"free_bytes"`
	Segments              []snapshot.SegmentFill     `json:"segments"`
	Settings              snapshot.AllocatorSettings `json:"allocator_settings"`
	OOMs                  []snapshot.OOMEvent        `json:"ooms"`
	Pools                 []rules.FragSnapshotPool   `json:"pools"`
}

// writeFragSnapshot answers the fragmentation question from an allocator
// snapshot, which sees what a trace cannot: the blocks inside segments.
// Free space split inside partly used segments (inactive split) cannot be
// returned by empty_cache nor serve a larger request.
func writeFragSnapshot(w io.Writer, t *rules.Table, format string) error {
	path := t.Input.Source
	rep, pools := t.Snapshot, t.SnapshotPools
	st := rep.Stats
	verdict, reason := fragVerdictOf(t)
	if format == JSON {
		return WriteJSON(w, fragSnapshotJSON{path, verdict, reason, st.ReservedBytes, st.AllocatedBytes, st.ActiveBytes, st.InactiveSplitBytes, st.LargestFreeBlock, st.FreeBytes,
			rep.SegmentFills, rep.Settings, rep.OOMs, pools})
	}
	if format == Markdown {
		// The verdict in Markdown, then the snapshot's tables and fill map
		// as snapshot --format markdown writes them (a fenced block that
		// names the file only in its escaped heading).
		fmt.Fprintf(w, "### %s\n\n**Verdict: %s**: %s\n\n", mdEscape(path), strings.ToUpper(verdict), mdEscape(reason))
		if verdict == rules.FragVerdictFragmented {
			fmt.Fprintf(w, "What to try: %s\n\n", mdEscape(rules.AdviceSplitFree))
		}
		return markdownBlock(w, func(w io.Writer) error { return writeSnapshotReport(w, "", rep, Text, 20, 0) })
	}
	fmt.Fprintf(w, "Verdict: %s: %s\n", strings.ToUpper(verdict), reason)
	if verdict == rules.FragVerdictFragmented {
		fmt.Fprintln(w, "What to try: "+rules.AdviceSplitFree)
	}
	fmt.Fprintln(w)
	return writeSnapshotReport(w, path, rep, Text, 20, 0)
}

// writeFragSummary answers from memory_summary() tables (the verdict is
// the Evaluation's: non-releasable memory over the snapshot.inactive-split
// limit, or cudaMalloc retries during the log).
func writeFragSummary(w io.Writer, t *rules.Table, format string) error {
	path := t.Input.Source
	doc := fragSummaryDocJSON{File: path, Devices: t.MemorySummary}
	doc.Verdict, doc.Reason = fragVerdictOf(t)
	if format == JSON {
		return WriteJSON(w, doc)
	}
	md := format == Markdown
	if md {
		fmt.Fprintf(w, "### %s\n\n**Verdict: %s**: %s\n\n", mdEscape(path), doc.Verdict, mdEscape(doc.Reason))
	} else {
		fmt.Fprintf(w, "%s\nVerdict: %s: %s\n", path, strings.ToUpper(doc.Verdict), doc.Reason)
	}
	tw := NewTable()
	tw.AppendHeader(table.Row{"Rank", "Device", "Tables", "Reserved", "Non-releasable", "Peak non-releasable", "Max share", "cudaMalloc retries", "OOMs"})
	for _, d := range doc.Devices {
		rank := "-"
		if d.Rank >= 0 {
			rank = fmt.Sprint(d.Rank)
		}
		tw.AppendRow(table.Row{rank, d.Device, d.Samples, memtimeline.FormatBytes(d.ReservedBytes), memtimeline.FormatBytes(d.NonReleasableBytes),
			memtimeline.FormatBytes(d.NonReleasablePeakBytes), fmt.Sprintf("%.1f%%", 100*d.NonReleasableFraction), d.Retries, d.OOMs})
	}
	Table(w, tw, format)
	if doc.Verdict == rules.FragVerdictFragmented && !md {
		fmt.Fprintln(w, "What to try: "+rules.AdviceSplitFree+" "+rules.AdviceSnapshotShowsSplit)
	}
	return nil
}

// fragVerdictOf is the Evaluation's fragmentation verdict of one input
// of the frag view, and its reason.
func fragVerdictOf(t *rules.Table) (verdict, reason string) {
	in := t.Input
	if a := t.FragAnswer; a != nil {
		switch {
		case a.Cost != "" && a.Verdict == rules.FragVerdictFragmented:
			return a.Verdict, "cost: " + a.Cost + "; measured: " + a.Reason
		case a.Cost != "":
			return a.Verdict, a.Cost
		}
		return a.Verdict, a.Reason
	}
	switch {
	case in.Has(rules.SourceSnapshot):
		return rules.FragVerdictUnknown, "the snapshot holds no reserved memory"
	case in.Has(rules.SourceMemSummary):
		return rules.FragVerdictUnknown, "no memory_summary() tables"
	}
	return rules.FragVerdictUnknown, ""
}
