package rules

// The analyses' vocabulary the commands render, named here so that cmd
// depends on rules alone: a command shows what the Evaluation concluded
// and the analysis behind it, and never calls an analysis itself (the
// import test in cmd/torchmem holds it to that).

import (
	"github.com/torchmem/torchmem/rules/diff"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// Leak analysis (rules/leak).
type (
	LeakOptions = leak.Options
	LeakReport  = leak.Report
	LeakSuspect = leak.Suspect
)

// Leak verdicts.
const (
	LeakVerdictLeak  = leak.VerdictLeak
	LeakVerdictClean = leak.VerdictClean
)

// DefaultLeakOptions are the leak analysis' defaults.
func DefaultLeakOptions() LeakOptions { return leak.DefaultOptions() }

// Fragmentation analysis (rules/frag).
type (
	FragOptions      = frag.Options
	FragReport       = frag.Report
	FragCodeSite     = frag.CodeSite
	FragGapPoint     = frag.GapPoint
	FragSnapshotPool = frag.SnapshotPool
)

// Fragmentation verdicts, and the advice for split free blocks.
const (
	FragVerdictFragmented = frag.VerdictFragmented
	FragVerdictOK         = frag.VerdictOK
	FragVerdictUnknown    = frag.VerdictUnknown
	AdviceSplitFree       = frag.AdviceSplitFree
	// AdviceSnapshotShowsSplit follows AdviceSplitFree for a memory_summary() log.
	AdviceSnapshotShowsSplit = frag.AdviceSnapshotShowsSplit
)

// DefaultFragOptions are the fragmentation analysis' defaults.
func DefaultFragOptions() FragOptions { return frag.DefaultOptions() }

// Comparison of two runs (rules/diff).
type (
	Diff            = diff.Diff
	DiffSide        = diff.Side
	DiffMover       = diff.Mover
	DiffMetricDelta = diff.MetricDelta
	DiffBudget      = diff.Budget
)

// SiteLabel names a site by its innermost user frame and outermost
// operator, so the same code line matches across runs (rules/site).
func SiteLabel(frames []string, operator string) string { return site.Label(frames, operator) }
