// Package report is torchmem's one rendering layer: it lays out what
// rules.Evaluate concluded (verdicts, checklists, the cross-rank view,
// findings) and what it computed for each view (Evaluation.Tables: each
// input's sorted operators and sites, its leak, fragmentation, step and
// nvidia-smi analyses, the page's charts with their markers, holders and
// explorer rows), in every output format: text, Markdown, JSON, SARIF,
// CSV, folded stacks and the HTML page. It is google/pprof's
// internal/report in shape: New builds a view's model once from the
// evaluation, Generate writes it in the format asked for, so that no two
// formats can tell different stories. It computes nothing: it selects,
// formats and escapes (TestReportComputesNothing holds that: no sort, no
// analysis call).
//
// The commands (cmd/torchmem) parse flags into rules.Options, load and
// evaluate once, hand the evaluation to New with their view and Generate,
// and exit; they lay out no table or document themselves (the rules list,
// of no evaluation, is NewRules). Wording a verdict, a fix or
// advice belongs to rules; this package lays it out, escaped for its
// medium (every table escapes its cells) and fitted to the width (text
// wraps with a hanging indent).
package report

import (
	"fmt"
	"io"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// View is which command's view a report shows.
type View string

// The views, one per command that prints a result.
const (
	// ViewCheck is the gate: verdict line, verdicts, checklist, findings.
	ViewCheck View = "check"
	// ViewAnalyze adds the cross-rank view and each input's tables.
	ViewAnalyze View = "analyze"
	// ViewLeaks adds each file's leak report (steps, leaks, suspects).
	ViewLeaks View = "leaks"
	// ViewPage is the self-contained HTML page (torchmem report, analyze -o).
	ViewPage View = "report"
	// ViewSnapshot is each allocator snapshot's report (Evaluation.Tables).
	ViewSnapshot View = "snapshot"
	// ViewFrag is each input's fragmentation report (Options.Frag, each input judged apart).
	ViewFrag View = "frag"
	// ViewDiff is each compared pair of runs (Evaluation.Diffs).
	ViewDiff View = "diff"
	// ViewOps is each trace's operator table (Evaluation.Tables).
	ViewOps View = "ops"
	// ViewStacks is each trace's allocation sites (Evaluation.Tables).
	ViewStacks View = "stacks"
	// ViewSMI is each nvidia-smi log's analysis.
	ViewSMI View = "smi"
	// ViewSteps is each per-step memory log's fit.
	ViewSteps View = "steps"
	// ViewRules is the list of rules in force (NewRules).
	ViewRules View = "rules"
	// ViewWrote says where the HTML page went and the run's verdict
	// (torchmem report).
	ViewWrote View = "wrote"
	// ViewAnnotated says what annotate wrote (Options.Annotated).
	ViewAnnotated View = "annotated"
)

// Options say which view to build and how to lay it out.
type Options struct {
	View   View
	Format string // Text, JSON, Markdown, SARIF, HTML...
	// Width is the text width (0: Width(), from $COLUMNS or the terminal).
	Width int
	// Top is the number of rows in the operator, site and suspect tables
	// (0: all).
	Top int
	// SourceRoot is the directory SARIF's file URIs are relative to
	// (empty: DefaultSourceRoot()).
	SourceRoot string
	// Version is torchmem's version, named by SARIF and the HTML page.
	Version string
	// Leaks is the number of leak candidate groups the snapshot view shows
	// (0: all).
	Leaks int
	// Weight is what a folded stack counts (stacks: alloc, live, peak).
	Weight string
	// Output is the file a command wrote (ViewWrote, ViewAnnotated).
	Output string
	// Annotated is what annotate added to the trace (ViewAnnotated).
	Annotated *Annotated
}

// Report is one command's view, built once (New, or the view's own
// constructor) and written by Generate in any of its formats.
type Report struct {
	Options
	Eval *rules.Evaluation
	// Inputs are analyze's per-input sections (ViewAnalyze).
	Inputs []InputAnalysis
	// LeakFiles are each file's leak report (ViewLeaks).
	LeakFiles []LeakFile
	// Snapshots are the snapshot view's reports.
	Snapshots []SnapshotFile
	// Diffs are the diff view's compared pairs.
	Diffs []rules.DiffPair
	// Operators are the ops view's tables.
	Operators []OperatorTable
	// Stacks are the stacks view's tables; foldedWeight is what a folded
	// stack counts.
	Stacks []SiteTable
	// RuleSet is the rules view's rules.
	RuleSet rules.RuleSet
}

// AllocationSites are the allocation sites analyze and the HTML page
// show: every device, the innermost 5 frames of the user's code.
var AllocationSites = memtimeline.SiteOptions{Device: -1, Depth: 5}

// New builds the view o.View of ev, the one constructor of every view of
// an evaluation: check, analyze, leaks, the HTML page, frag, steps, smi,
// diff (ev.Diffs) and the tables of ops, stacks and snapshot (ev.Tables).
// The rules view, of no evaluation, is NewRules.
func New(ev *rules.Evaluation, o Options) *Report {
	if o.Width <= 0 {
		o.Width = Width()
	}
	r := &Report{Options: o, Eval: ev}
	switch o.View {
	case ViewAnalyze:
		r.Inputs = analyses(ev, o.Top)
	case ViewLeaks:
		r.LeakFiles = leakFiles(ev, o.Top)
	case ViewDiff:
		r.Diffs = ev.Diffs
	case ViewOps, ViewStacks, ViewSnapshot:
		r.tables(ev.Tables)
	}
	return r
}

// Generate writes r in its format.
func Generate(w io.Writer, r *Report) error {
	switch r.View {
	case ViewCheck:
		return r.writeCheck(w)
	case ViewAnalyze:
		return r.writeAnalyze(w)
	case ViewLeaks:
		return r.writeLeaks(w)
	case ViewPage:
		return r.writePage(w)
	case ViewSnapshot:
		return r.writeSnapshots(w)
	case ViewFrag:
		return r.writeFrag(w)
	case ViewDiff:
		return r.writeDiff(w)
	case ViewOps:
		return r.writeOperators(w)
	case ViewStacks:
		return r.writeStacks(w)
	case ViewSMI:
		return r.writeSMI(w)
	case ViewSteps:
		return r.writeSteps(w)
	case ViewRules:
		return writeRules(w, r.RuleSet.Rules, r.Format)
	case ViewWrote:
		_, err := fmt.Fprintf(w, "wrote %s\n%s\n", r.Output, VerdictLine(r.Eval))
		return err
	case ViewAnnotated:
		return r.writeAnnotated(w)
	}
	return fmt.Errorf("report: no view %q", r.View)
}
