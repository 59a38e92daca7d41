package rules

// Evaluate is the one answer every command renders: each rule run once per
// input, each run and rank judged once with the thresholds in force, one
// finding per leak, the checklist, the cross-rank view, the counts and the
// exit code. Commands differ in which parts they show, never in what they
// conclude (pprof's shape: one profile, one report, many formats).

import (
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/internal/crash"
	"github.com/torchmem/torchmem/internal/more"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
)

// RuleSet is the rules in force (the built-in ones with a config's
// overrides) and the ids the config disabled, so that what was not
// checked can be said so.
type RuleSet struct {
	Rules    []Rule
	Disabled []string
	// fragOptions are the frag command's options (withFrag); nil: the
	// defaults.
	fragOptions *frag.Options
}

// NewRuleSet applies cfg (nil: the defaults) to the built-in rules.
func NewRuleSet(cfg *Config) (RuleSet, error) {
	rs, err := cfg.Apply(Builtin())
	if err != nil {
		return RuleSet{}, err
	}
	set := RuleSet{Rules: rs, Disabled: []string{}}
	if cfg != nil {
		// memory.leak's threshold is the run's: a leak's severity must not
		// depend on which file measured it (a trace alone against the
		// folder holding it and its snapshot and step log). The other
		// per-step leak rules take it unless the config sets theirs.
		if rc, ok := cfg.Rules[RuleLeak]; ok && rc.Threshold != nil {
			for i := range set.Rules {
				id := set.Rules[i].ID
				if own, ok := cfg.Rules[id]; (id == "snapshot.leak" || id == "steps.growth") && (!ok || own.Threshold == nil) {
					set.Rules[i].Threshold = rc.Threshold.Value
				}
			}
		}
		for id, rc := range cfg.Rules {
			if rc.Disabled {
				set.Disabled = append(set.Disabled, id)
			}
		}
		slices.Sort(set.Disabled)
	}
	return set, nil
}

// DefaultRuleSet is every built-in rule with its defaults.
func DefaultRuleSet() RuleSet { return RuleSet{Rules: Builtin(), Disabled: []string{}} }

// Rule returns the rule in force with this id (nil when disabled or
// unknown).
func (s RuleSet) Rule(id string) *Rule {
	for i := range s.Rules {
		if s.Rules[i].ID == id {
			return &s.Rules[i]
		}
	}
	return nil
}

// IsDisabled reports whether the config disabled the rule.
func (s RuleSet) IsDisabled(id string) bool { return slices.Contains(s.Disabled, id) }

// threshold is the rule's threshold in force, or its default when the
// rule is disabled (a verdict is still judged, on the default).
func (s RuleSet) threshold(id string) float64 {
	if r := s.Rule(id); r != nil {
		return r.Threshold
	}
	for _, r := range Builtin() {
		if r.ID == id {
			return r.Threshold
		}
	}
	return 0
}

// JudgeOptions are the thresholds a verdict is judged with: the rules'
// thresholds in force, so that the verdict and the findings agree.
type JudgeOptions struct {
	// SnapshotSplit is snapshot.inactive-split's fraction of reserved.
	SnapshotSplit float64
	// Frag are the trace fragmentation signals' thresholds.
	Frag frag.Options
}

// DefaultJudgeOptions are the built-in rules' thresholds.
func DefaultJudgeOptions() JudgeOptions { return DefaultRuleSet().JudgeOptions() }

// JudgeOptions are the verdict's thresholds from the rules in force.
func (s RuleSet) JudgeOptions() JudgeOptions {
	o := JudgeOptions{SnapshotSplit: s.threshold(ruleSnapshotSplit), Frag: frag.DefaultOptions()}
	if s.fragOptions != nil {
		o.Frag = *s.fragOptions
	}
	o.Frag.MinSmallPerStep = s.threshold(frag.SmallAllocFlood)
	o.Frag.MinGapFraction = s.threshold(frag.ReservedGap)
	o.Frag.MinChurnPerStep = s.threshold(frag.CudaMallocChurn)
	return o
}

// Options are everything an evaluation is made with: the rules in force
// and how each analysis measures (the commands' flags). They reach the
// analyses one way, through Evaluate: it gives each input its options and
// folds the options that are thresholds into the rules in force.
type Options struct {
	// Rules are the rules in force (DefaultOptions: every built-in rule
	// with its defaults).
	Rules RuleSet
	// Sites, when set, computes the analyses the tables show (operators,
	// allocation sites, summaries) beside the rules, in parallel.
	Sites *memtimeline.SiteOptions
	// Page, when set, computes the charts the HTML page draws
	// (Table.Charts: holders, explorer rows, leak markers) beside the
	// tables.
	Page bool
	// Tracks, when set, computes what annotate adds to a trace
	// (Table.Timelines, Table.StepsInOrder, Table.Frag).
	Tracks bool
	// Leak is how a trace's or snapshot's leaks are found (leaks'
	// --device, --depth, --steady-steps); nil: leak's defaults. The
	// verdict, the rules and the leak tables all read this one analysis,
	// so that a filter applies to the answer, not only to a table.
	Leak *leak.Options
	// Steps is how a step log is fitted (steps' --warmup); nil: steplog's
	// defaults.
	Steps *steplog.Options
	// SMI is how nvidia-smi logs are analyzed (smi's flags); its
	// thresholds become the smi rules' (withSMI). Nil: smi's defaults.
	SMI *smi.Options
	// Frag are frag's options; its thresholds become the frag rules'
	// (withFrag). Nil: the defaults.
	Frag *frag.Options
	// Separately judges each input on its own, as its own run: frag and
	// steps answer for each file, whatever else lies beside it.
	Separately bool
	// Tables, when set, judges nothing: the evaluation holds the tables it
	// asks for (ops, stacks, snapshot show an analysis, not a verdict).
	Tables *TableQuery
	// Compare, when set, compares Compare.Base (BASE) with the inputs
	// (HEAD) instead of judging them: diff (compare.go).
	Compare *CompareQuery
}

// DefaultOptions evaluate with every built-in rule at its defaults.
func DefaultOptions() Options { return Options{Rules: DefaultRuleSet()} }

// Checklist statuses beyond pass, fail and not measurable: not checked
// (the rule is disabled), and warn (the rule fired at warning severity or
// below: a leak under the threshold is found, yet the gate passes).
const (
	CheckNotChecked = "not checked"
	CheckWarn       = "warn"
)

// warnBelowError turns a failed item into warn when every finding of its
// rules on the run is below error severity, so that no item says FAIL
// under a gate that passed.
func warnBelowError(v Verdict, items []CheckItem, fs []Finding) []CheckItem {
	mine := map[string]bool{}
	for _, s := range v.Sources {
		mine[s] = true
	}
	for i := range items {
		it := &items[i]
		if it.Status != CheckFail {
			continue
		}
		seen, errs := false, false
		for _, f := range fs {
			if mine[f.Source] && slices.Contains(it.Rules, f.Rule) {
				seen = true
				errs = errs || f.Severity >= Error
			}
		}
		if seen && !errs {
			it.Status = CheckWarn
		}
	}
	return items
}

// NamedChecklist is one run and rank's checklist.
type NamedChecklist struct {
	Name  string      `json:"name"`
	Items []CheckItem `json:"items"`
}

// Evaluation is the answer for a set of inputs.
type Evaluation struct {
	// RuleSet are the rules in force (Options.Rules with the options
	// that are thresholds folded in).
	RuleSet RuleSet
	// Options are what the evaluation was made with.
	Options Options
	Inputs  []*Input
	// Verdicts are one per run and rank; Checklists[i] is Verdicts[i]'s.
	Verdicts   []Verdict
	Checklists []NamedChecklist
	// CrossRank compares the ranks (nil with fewer than two).
	CrossRank *CrossRank
	// Findings are every rule's, one per leak, most severe first.
	Findings []Finding
	// Errors, Warnings and Notes count the findings by severity.
	Errors, Warnings, Notes int
	// Unmeasured is set when no input carries memory evidence (a trace
	// recorded without profile_memory=True and nothing else): the answer
	// could only be "unknown", and a gate must not pass on it.
	Unmeasured error
	// Tables are the tables Options.Tables asked for, one per input; of a
	// judged evaluation, what its views show of each input, in Inputs'
	// order.
	Tables []Table
	// RunCharts are, with Options.Page, each verdict's run on one clock
	// (nil for a verdict of one input).
	RunCharts []*MemoryChart
	// Diffs are the compared pairs of Options.Compare; Unpaired names the
	// inputs that had no counterpart on the other side.
	Diffs    []DiffPair
	Unpaired []string
	// Messages are notes for the user beside the answer (an input that
	// cannot show what was asked), each naming its file.
	Messages []string
}

// Evaluate is the one entry to the answer: it runs the rules on every
// input once, judges each run and rank once and derives everything else
// from those; with o.Tables it computes those tables only, with o.Compare
// it compares two runs.
func Evaluate(ins []*Input, o Options) *Evaluation {
	rs := o.Rules
	if o.SMI != nil {
		rs = rs.withSMI(*o.SMI)
	}
	if o.Frag != nil {
		rs = rs.withFrag(*o.Frag)
	}
	for _, in := range ins {
		if o.Leak != nil {
			in.leakOpts = o.Leak
		}
		if o.Steps != nil {
			in.stepOpts = o.Steps
		}
		if o.SMI != nil && (in.Has(SourceSMI) || in.Has(SourceSMIApps)) {
			in.smiOpts = o.SMI
		}
	}
	switch {
	case o.Compare != nil:
		return compare(ins, rs, o)
	case o.Tables != nil:
		ev := &Evaluation{RuleSet: rs, Options: o, Inputs: ins, Findings: []Finding{}}
		ev.Tables, ev.Messages = tables(ins, *o.Tables)
		return ev
	case o.Separately && len(ins) > 1:
		parts := make([]*Evaluation, len(ins))
		for i, in := range ins {
			parts[i] = evaluate(rs, []*Input{in}, o)
		}
		ev := merged(parts)
		ev.Options = o
		return ev
	}
	ev := evaluate(rs, ins, o)
	ev.Options = o
	return ev
}

// merged is the evaluations of inputs judged apart, as one: their
// verdicts, checklists and findings side by side (no cross-rank view: the
// inputs were not compared).
func merged(parts []*Evaluation) *Evaluation {
	ev := &Evaluation{RuleSet: parts[0].RuleSet, Findings: []Finding{}}
	for _, p := range parts {
		ev.Inputs = append(ev.Inputs, p.Inputs...)
		ev.Verdicts = append(ev.Verdicts, p.Verdicts...)
		ev.Checklists = append(ev.Checklists, p.Checklists...)
		ev.Tables = append(ev.Tables, p.Tables...)
		ev.RunCharts = append(ev.RunCharts, p.RunCharts...)
		ev.Findings = append(ev.Findings, p.Findings...)
		ev.Errors, ev.Warnings, ev.Notes = ev.Errors+p.Errors, ev.Warnings+p.Warnings, ev.Notes+p.Notes
	}
	var un []*Input
	for _, p := range parts {
		if p.Unmeasured == nil {
			un = nil
			break
		}
		un = append(un, p.Inputs...)
	}
	ev.Unmeasured = unmeasured(un)
	slices.SortStableFunc(ev.Findings, func(a, b Finding) int { return int(b.Severity) - int(a.Severity) })
	return ev
}

// evaluate judges ins together with the rules rs.
func evaluate(rs RuleSet, ins []*Input, o Options) *Evaluation {
	sites := o.Sites
	ev := &Evaluation{RuleSet: rs, Inputs: ins, Unmeasured: unmeasured(ins)}
	for _, in := range ins {
		if in.Has(SourceSMI) || in.Has(SourceSMIApps) {
			o := rs.smiOptionsOf(in)
			in.smiOpts = &o
		}
	}
	perInput := make([][]Finding, len(ins))
	for i, in := range ins {
		if sites != nil {
			perInput[i] = RunWith(rs.Rules, in, *sites)
		} else {
			perInput[i] = Run(rs.Rules, in)
		}
	}
	var all []Finding
	for _, fs := range perInput {
		all = append(all, fs...)
	}
	ev.Verdicts = judgeAllWith(ins, rs.JudgeOptions())
	all = overruledLeakFindings(ev.Verdicts, mergeLeakFindings(ev.Verdicts, all))
	all = mergeOOMFindings(ev.Verdicts, all)
	all = append(all, verdictLeakFindings(rs, ev.Verdicts, all)...)
	slices.SortStableFunc(all, func(a, b Finding) int { return int(b.Severity) - int(a.Severity) })
	if all == nil {
		all = []Finding{}
	}
	ev.Findings = all
	ev.count()
	ev.Checklists = make([]NamedChecklist, len(ev.Verdicts))
	var g crash.Group
	for i, v := range ev.Verdicts {
		g.Go(func() {
			ev.Checklists[i] = NamedChecklist{Name: v.Name, Items: rs.markDisabled(v, warnBelowError(v, Checklist(v, all), all))}
		})
	}
	g.Wait()
	ev.CrossRank = CompareRanks(ev.Verdicts)
	ev.Tables = judgedTables(ev, o)
	if o.Page {
		ev.RunCharts = runCharts(ev.Verdicts)
	}
	return ev
}

// count counts the findings by severity.
func (ev *Evaluation) count() {
	ev.Errors, ev.Warnings, ev.Notes = 0, 0, 0
	for _, f := range ev.Findings {
		switch f.Severity {
		case Error:
			ev.Errors++
		case Warning:
			ev.Warnings++
		default:
			ev.Notes++
		}
	}
}

// hasMemoryEvidence reports whether the input records GPU memory at all:
// a trace's [memory] events, or any other kind torchmem reads (each of
// them is memory by what it is).
func (in *Input) hasMemoryEvidence() bool {
	switch {
	case !in.Is(SourceTrace):
		return true
	case in.IsDigest():
		return in.Digest.Overview == nil || in.Digest.Overview.MemoryEvents > 0 || in.Digest.Overview.OOMEvents > 0
	}
	return len(in.Trace.Memory) > 0 || len(in.Trace.OOMs) > 0
}

// RecordMemory says how to record a trace torchmem can read memory from.
const RecordMemory = "record it with torch.profiler.profile(profile_memory=True, with_stack=True, record_shapes=True) over at least 3 steps (torchmem snippet: TorchMemProfile does it), or add an allocator snapshot or a per-step memory_stats() log"

// unmeasured is the error of inputs none of which records memory.
func unmeasured(ins []*Input) error {
	if len(ins) == 0 {
		return nil
	}
	var names []string
	for _, in := range ins {
		if in.hasMemoryEvidence() {
			return nil
		}
		names = append(names, in.Source)
	}
	what := names[0] + " has"
	if len(names) > 1 {
		what = fmt.Sprintf("none of the %d inputs (%s) has", len(names), more.Join(names, 3, ", "))
	}
	return fmt.Errorf("%s no GPU memory events (%s): nothing to measure memory by; %s", what, noMemoryCause(ins[0]), RecordMemory)
}

// noMemoryCause says why a trace holds no GPU memory events, as far as the
// trace tells: a legacy export drops them, a CPU run has none to record.
func noMemoryCause(in *Input) string {
	t := in.Trace
	if t == nil {
		return "the profiler ran without profile_memory=True"
	}
	cpu := false
	for i := range t.Memory {
		cpu = cpu || t.Memory[i].DeviceType == chrometrace.DeviceCPU
	}
	switch {
	case t.Meta.Legacy:
		return "a legacy profiler export, which holds no memory events"
	case cpu:
		return "the trace records CPU memory only: the run allocated no GPU memory in the window"
	case t.Meta.ProfileMemory == 1:
		return "profile_memory was on, but no GPU allocation happened in the window"
	}
	return "the profiler ran without profile_memory=True"
}

// The exit policy, the same for every command: 1 when a finding is at
// error severity (a leak verdict always comes with its finding), 2 for bad
// input (the commands' own), 0 otherwise.
const (
	ExitOK       = 0
	ExitFindings = 1
)

// ExitCode is the exit status the evaluation calls for.
func (ev *Evaluation) ExitCode() int {
	if ev.Errors > 0 {
		return ExitFindings
	}
	return ExitOK
}

// Passed reports whether no finding is at error severity.
func (ev *Evaluation) Passed() bool { return ev.Errors == 0 }

// FindingsFor are the findings about one input file, most severe first.
func (ev *Evaluation) FindingsFor(source string) []Finding {
	out := []Finding{}
	for _, f := range ev.Findings {
		if f.Source == source {
			out = append(out, f)
		}
	}
	return out
}

// Leaking reports whether any run or rank leaks.
func (ev *Evaluation) Leaking() bool {
	for _, v := range ev.Verdicts {
		if v.Leak.Verdict == leak.VerdictLeak {
			return true
		}
	}
	return false
}

// leakRuleOf is the leak rule that judges evidence of a source kind.
func leakRuleOf(kind SourceKind) string {
	switch kind {
	case SourceSnapshot:
		return "snapshot.leak"
	case SourceSteps, SourceMemSummary:
		return "steps.growth"
	case SourceSMI:
		return "smi.leak"
	}
	return RuleLeak
}

// verdictLeakFindings gives every leaking run a finding when none of its
// files' rules made one (a leak that starts mid-log, seen by the verdict's
// tail fit), so that the verdict and the exit code never disagree: its
// severity is the leak rule's, a warning under the rule's threshold. A
// disabled rule makes none.
func verdictLeakFindings(rs RuleSet, vs []Verdict, fs []Finding) []Finding {
	var out []Finding
	for _, v := range vs {
		l := v.Leak
		if l.Verdict != leak.VerdictLeak {
			continue
		}
		mine := map[string]bool{}
		for _, s := range v.Sources {
			mine[s] = true
		}
		if slices.ContainsFunc(fs, func(f Finding) bool { return IsLeakRule(f.Rule) && mine[f.Source] }) {
			continue
		}
		kind := SourceTrace
		for _, e := range l.Evidence {
			if e.Verdict == leak.VerdictLeak {
				kind = e.Kind
				break
			}
		}
		r := rs.Rule(leakRuleOf(kind))
		if r == nil {
			continue // disabled: the checklist says it was not checked
		}
		f := Finding{Rule: r.ID, Severity: r.Severity, Source: l.FromFile, Location: l.Location, Operator: l.Operator,
			Metrics: map[string]float64{"bytes_per_step": float64(l.BytesPerStep)}}
		if r.Unit == "bytes_per_step" && float64(l.BytesPerStep) < r.Threshold {
			f.Severity = min(f.Severity, Warning)
		}
		kindText := ""
		if l.Kind != "" {
			kindText = " (" + l.Kind + ")"
		}
		f.Title = fmt.Sprintf("Leak%s: %s per step", kindText, memtimeline.FormatBytes(l.BytesPerStep))
		if l.Location != nil {
			f.Title += " allocated at " + l.Location.String()
		}
		f.Detail = strings.TrimSuffix(l.Reason, ".") + "; from " + l.From + "."
		f.Advice = l.Fix
		if f.Advice == "" {
			f.Advice = AdviceFindTheLine
		}
		out = append(out, f)
	}
	return out
}

// AdviceFindTheLine is what to do when a log shows growth but no line.
const AdviceFindTheLine = "Profile a few steps with the torchmem snippet and run torchmem leaks on the trace to find the line."

// markDisabled turns the items whose rules are all disabled into "not
// checked": a disabled rule neither passes nor fails anything.
func (s RuleSet) markDisabled(v Verdict, items []CheckItem) []CheckItem {
	if len(s.Disabled) == 0 {
		return items
	}
	for i := range items {
		it := &items[i]
		rules := it.Rules
		switch it.ID {
		case "leak", "eval-no-grad", "kept-in-lists":
			// The rules of the evidence at hand: a trace's leak is
			// memory.leak's to judge, a snapshot's snapshot.leak's.
			var judged []string
			for _, e := range v.Leak.Evidence {
				if id := leakRuleOf(e.Kind); slices.Contains(it.Rules, id) && !slices.Contains(judged, id) {
					judged = append(judged, id)
				}
			}
			if len(judged) > 0 {
				rules = judged
			}
		}
		if len(rules) == 0 || !allDisabled(s, rules) {
			continue
		}
		it.Status = CheckNotChecked
		it.Detail = "rule disabled: " + strings.Join(rules, ", ")
		it.Record = ""
	}
	return items
}

func allDisabled(s RuleSet, ids []string) bool {
	for _, id := range ids {
		if !s.IsDisabled(id) {
			return false
		}
	}
	return true
}
