package rules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/internal/crash"

	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// Severity orders findings; only Error fails `torchmem check`.
type Severity int

const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "unknown"
}

// parseSeverity reads "info", "warning" or "error".
func parseSeverity(s string) (Severity, error) {
	switch strings.ToLower(s) {
	case "info", "note":
		return Info, nil
	case "warning", "warn":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return Info, fmt.Errorf("unknown severity %q (want info, warning or error)", s)
}

func (s Severity) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

func (s *Severity) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	v, err := parseSeverity(str)
	*s = v
	return err
}

// Finding is one thing a rule found, with the numbers that prove it.
type Finding struct {
	Rule     string         `json:"rule"`
	Severity Severity       `json:"severity"`
	Title    string         `json:"title"`
	Detail   string         `json:"detail"`
	Advice   string         `json:"advice,omitempty"`
	Operator string         `json:"operator,omitempty"`
	Location *site.Location `json:"location,omitempty"`
	// Metrics are the evidence in numbers, keyed with their unit
	// ("bytes_per_step", "fraction", "count").
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Source is the input file the finding is about.
	Source string `json:"source,omitempty"`
	// belowThreshold: the rule fired on evidence (a regular leak) with a
	// size under its threshold: at most a warning.
	belowThreshold bool
}

// Input is what rules look at: one input file of any kind torchmem
// reads, with analyses computed on first use and shared between rules.
// Make one with NewInput (or NewDigestInput): the field of its Kind is set
// (a memory-summary input's StepLog too), the others are nil.
type Input struct {
	Source string
	// Kind is what the file holds (NewInput sets it from the data; for a
	// Digest, the kind of the file it was made from). Code that differs by
	// kind asks InputKind or Is, not which field is nil.
	Kind SourceKind
	// Rank is the distributed rank, or -1 when unknown.
	Rank       int64
	Trace      *chrometrace.Trace
	SMI        *smi.Log
	SMIApps    *smi.AppsLog
	StepLog    *steplog.Log
	Snapshot   *snapshot.Snapshot
	Timeline   *exported.Timeline
	MemSummary *memsummary.Log
	// Digest is set instead of the fields above for an input read back
	// from a digest (torchmem summarize); Kind is then the kind of the
	// file it was made from.
	Digest *Digest
	// stepOpts, smiOpts and leakOpts are how this input's step
	// log is fitted, its nvidia-smi log analyzed and its leaks found: the
	// evaluation's Options, given to each input by Evaluate only (nil: the
	// analyses' defaults). The verdict, the rules and the tables all read
	// the one analysis made with them.
	stepOpts *steplog.Options
	smiOpts  *smi.Options
	leakOpts *leak.Options

	mu    sync.Mutex
	cache map[string]*memoEntry
	// computed counts the analyses computed, by key (tests check that
	// each is computed once per input).
	computed map[string]int
}

// Memo computes a shared analysis once per input. Each key has its own
// once, so an analysis may itself use Memo for another key (the leak rule
// builds on the per-operator table) without deadlocking.
func Memo[T any](in *Input, key string, compute func() T) T {
	in.mu.Lock()
	if in.cache == nil {
		in.cache = map[string]*memoEntry{}
	}
	e := in.cache[key]
	if e == nil {
		e = &memoEntry{}
		in.cache[key] = e
	}
	in.mu.Unlock()
	e.once.Do(func() {
		e.value = compute()
		in.mu.Lock()
		if in.computed == nil {
			in.computed = map[string]int{}
		}
		in.computed[key]++
		in.mu.Unlock()
	})
	return e.value.(T)
}

type memoEntry struct {
	once  sync.Once
	value any
}

// Rule is one detector with its defaults. Check reads the threshold and
// severity from the rule it is given, so configuration can override them.
type Rule struct {
	ID          string
	Description string
	Severity    Severity
	// Threshold is the rule's limit in Unit (bytes, fraction, count...).
	Threshold float64
	Unit      string
	// Reads are the kinds of input the rule reads: Run calls Check only on
	// an input of one of them (never on a digest read back, whose findings
	// were computed when it was summarized), so Check may take the data of
	// its kinds as there.
	Reads []SourceKind
	Check func(r *Rule, in *Input) []Finding
}

// reads says whether r reads inputs of kind k.
func (r *Rule) reads(k SourceKind) bool { return slices.Contains(r.Reads, k) }

var (
	registryMu sync.Mutex
	registry   []*Rule
)

// register adds a built-in rule; each rule's file calls it from init.
func register(r *Rule) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry = append(registry, r)
}

// Builtin returns copies of every built-in rule, sorted by id.
func Builtin() []Rule {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Rule, len(registry))
	for i, r := range registry {
		out[i] = *r
	}
	slices.SortFunc(out, func(a, b Rule) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Run applies rules to an input; findings come out most severe first.
func Run(rs []Rule, in *Input) []Finding {
	var out []Finding
	if in.IsDigest() {
		out = digestFindings(rs, in)
		slices.SortStableFunc(out, func(a, b Finding) int { return int(b.Severity) - int(a.Severity) })
		return out
	}
	kind := in.InputKind()
	// The rules check side by side: each reads analyses computed once
	// (Memo), and the slowest few (idle gaps, zero_grad, op holdings on a
	// large trace) would otherwise run one after another after the rest
	// of the evaluation is done. Findings come out in the rules' order.
	found := make([][]Finding, len(rs))
	var g crash.Group
	for i := range rs {
		r := &rs[i]
		if r.reads(kind) {
			g.Go(func() { found[i] = r.Check(r, in) })
		}
	}
	g.Wait()
	for i := range rs {
		r := &rs[i]
		for _, f := range found[i] {
			if f.Rule == "" {
				f.Rule = r.ID
			}
			f.Severity = r.Severity
			if f.belowThreshold && f.Severity > Warning {
				f.Severity = Warning
			}
			if f.Source == "" {
				f.Source = in.Source
			}
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b Finding) int { return int(b.Severity) - int(a.Severity) })
	return out
}
