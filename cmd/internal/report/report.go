// Package report is torchmem's one rendering layer: it lays out what
// rules.Evaluate concluded (verdicts, checklists, the cross-rank view,
// findings) and what each command's own analysis found, in every output
// format: text, Markdown, JSON, SARIF, CSV, folded stacks and the HTML
// page. It is google/pprof's internal/report in shape: New builds a view's
// model once from the evaluation, Generate writes it in the format asked
// for, so that no two formats can tell different stories.
//
// The commands (cmd/torchmem) parse flags, load, evaluate, hand the
// evaluation (or their own analysis: ops, stacks, snapshot, smi, steps,
// frag, diff, rules) to a view's constructor and Generate, and exit; they
// lay out no table or document themselves. Wording a verdict, a fix or
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
	// ViewSnapshot is each allocator snapshot's report (NewSnapshots).
	ViewSnapshot View = "snapshot"
	// ViewFrag is each input's fragmentation report (NewFrag).
	ViewFrag View = "frag"
	// ViewDiff is each compared pair of runs (NewDiff).
	ViewDiff View = "diff"
	// ViewOps is each trace's operator table (NewOps).
	ViewOps View = "ops"
	// ViewStacks is each trace's allocation sites (NewStacks).
	ViewStacks View = "stacks"
	// ViewSMI is each nvidia-smi log's analysis (NewSMI).
	ViewSMI View = "smi"
	// ViewSteps is each per-step memory log's fit (NewSteps).
	ViewSteps View = "steps"
	// ViewRules is the list of rules in force (NewRules).
	ViewRules View = "rules"
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
	// Leak, for ViewLeaks, are the options each file's leak report is made
	// with (the verdicts are the Evaluation's whatever they are).
	Leak rules.LeakOptions
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
	Snapshots     []SnapshotFile
	snapshotLeaks int
	// FragInputs are the frag view's inputs, each with its evaluation.
	FragInputs []FragInput
	// Diffs are the diff view's compared pairs.
	Diffs []DiffPair
	// Operators are the ops view's tables.
	Operators []OperatorTable
	// Stacks are the stacks view's tables; foldedWeight is what a folded
	// stack counts.
	Stacks       []SiteTable
	foldedWeight func(*memtimeline.Site) int64
	// StepLogs are the steps view's logs.
	StepLogs []*rules.Input
	// RuleSet is the rules view's rules.
	RuleSet rules.RuleSet
}

// AllocationSites are the allocation sites analyze and the HTML page
// show: every device, the innermost 5 frames of the user's code.
var AllocationSites = memtimeline.SiteOptions{Device: -1, Depth: 5}

// New builds the view o.View of ev: check, analyze, leaks or the HTML
// page. The views of a command's own analysis have their constructors
// (NewOps, NewStacks, NewSnapshots, NewFrag, NewDiff, NewSMI, NewSteps,
// NewRules).
func New(ev *rules.Evaluation, o Options) *Report {
	if o.Width <= 0 {
		o.Width = Width()
	}
	r := &Report{Options: o, Eval: ev}
	switch o.View {
	case ViewAnalyze:
		r.Inputs = analyses(ev, o.Top)
	case ViewLeaks:
		r.LeakFiles = leakFiles(ev, o.Leak, o.Top)
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
	}
	return fmt.Errorf("report: no view %q", r.View)
}
