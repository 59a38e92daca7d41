package diff

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// Side is one side of a diff: the analyses of a trace (or of a snapshot)
// reduced to what can be compared between two runs.
type Side struct {
	Source             string
	PeakAllocatedBytes int64
	PeakReservedBytes  int64
	Steps              int
	GrowthBytesPerStep int64
	LeakVerdict        string
	// Operators maps an operator name to its Self CUDA Mem.
	Operators map[string]int64
	// Sites maps a site ("file.py(12): fn via aten::op") to its bytes.
	SiteAlloc map[string]int64
	SiteLive  map[string]int64
	Suspects  []leak.Suspect
	// StepSurvivors lists survivor bytes per step, in step order.
	StepSurvivors []int64

	// StepPeakAllocated is the peak allocated of each step, in step order
	// (empty when not measured: a snapshot, an older summary).
	StepPeakAllocated []int64 `json:",omitempty"`
}

// NewSnapshotSide reduces an allocator snapshot for diffing: its reserved
// and allocated bytes stand in for the peaks, and its never-freed groups
// for the sites.
func NewSnapshotSide(source string, rep *snapshot.Report) *Side {
	s := &Side{Source: source, Operators: map[string]int64{}, SiteAlloc: map[string]int64{}, SiteLive: map[string]int64{}}
	s.PeakAllocatedBytes, s.PeakReservedBytes = rep.Stats.AllocatedBytes, rep.Stats.ReservedBytes
	leaks := leak.AnalyzeSnapshot(rep, leak.DefaultOptions())
	s.GrowthBytesPerStep, s.LeakVerdict, s.Suspects = leaks.GrowthBytesPerStep, leaks.Verdict, leaks.Suspects
	for _, c := range rep.Leaks {
		k := fmt.Sprintf("%s(%d): %s", c.Site.Filename, c.Site.Line, c.Site.Name)
		s.SiteLive[k] += c.Bytes
		s.SiteAlloc[k] += c.Bytes
	}
	return s
}

// Merge sums per-rank sides into one (peaks: the largest rank).
func Merge(source string, sides []*Side) *Side {
	if len(sides) == 1 {
		return sides[0]
	}
	out := &Side{Source: source, Operators: map[string]int64{}, SiteAlloc: map[string]int64{}, SiteLive: map[string]int64{}, LeakVerdict: leak.VerdictClean}
	for _, s := range sides {
		out.PeakAllocatedBytes = max(out.PeakAllocatedBytes, s.PeakAllocatedBytes)
		out.PeakReservedBytes = max(out.PeakReservedBytes, s.PeakReservedBytes)
		out.Steps = max(out.Steps, s.Steps)
		out.GrowthBytesPerStep = max(out.GrowthBytesPerStep, s.GrowthBytesPerStep)
		if s.LeakVerdict == leak.VerdictLeak || (s.LeakVerdict == leak.VerdictUnknown && out.LeakVerdict == leak.VerdictClean) {
			out.LeakVerdict = s.LeakVerdict
		}
		for k, v := range s.Operators {
			out.Operators[k] += v
		}
		for k, v := range s.SiteAlloc {
			out.SiteAlloc[k] += v
		}
		for k, v := range s.SiteLive {
			out.SiteLive[k] += v
		}
		out.Suspects = append(out.Suspects, s.Suspects...)
		for i, b := range s.StepPeakAllocated { // the largest rank's, step by step
			if i == len(out.StepPeakAllocated) {
				out.StepPeakAllocated = append(out.StepPeakAllocated, 0)
			}
			out.StepPeakAllocated[i] = max(out.StepPeakAllocated[i], b)
		}
	}
	return out
}

// Mover is a name whose bytes changed between the sides.
type Mover struct {
	Name  string `json:"name"`
	Base  int64  `json:"base_bytes"`
	Head  int64  `json:"head_bytes"`
	Delta int64  `json:"delta_bytes"`
	// DeltaPerStep compares bytes per profiled step, so runs of different
	// lengths compare; 0 when either side has no steps.
	DeltaPerStep int64 `json:"delta_bytes_per_step"`
}

// MetricDelta compares one number between the sides.
type MetricDelta struct {
	Metric string  `json:"metric"`
	Base   int64   `json:"base"`
	Head   int64   `json:"head"`
	Delta  int64   `json:"delta"`
	Pct    float64 `json:"percent"` // NaN-free: 0 when base is 0
}

// Diff is what changed from base to head.
type Diff struct {
	Base, Head     string
	Metrics        []MetricDelta
	BaseVerdict    string
	HeadVerdict    string
	Operators      []Mover
	SitesAlloc     []Mover
	SitesLive      []Mover
	NewSuspects    []leak.Suspect
	HeadSuspects   []leak.Suspect
	StepSurvivors  [][2]int64 // matched by position in the profiled window
	Changed        bool
	ChangedSummary string

	// StepPeakAllocated holds base's and head's peak allocated per step,
	// matched by position in the profiled window; nil unless both have it.
	StepPeakAllocated *[2][]int64
}

func delta(metric string, base, head int64) MetricDelta {
	d := MetricDelta{Metric: metric, Base: base, Head: head, Delta: head - base}
	if base != 0 {
		d.Pct = 100 * float64(head-base) / math.Abs(float64(base))
	}
	return d
}

func movers(base, head map[string]int64, baseSteps, headSteps, top int) []Mover {
	keys := map[string]bool{}
	for k := range base {
		keys[k] = true
	}
	for k := range head {
		keys[k] = true
	}
	var out []Mover
	for k := range keys {
		if d := head[k] - base[k]; d != 0 {
			m := Mover{Name: k, Base: base[k], Head: head[k], Delta: d}
			if baseSteps > 0 && headSteps > 0 {
				m.DeltaPerStep = head[k]/int64(headSteps) - base[k]/int64(baseSteps)
			}
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Mover) int {
		return cmp.Or(cmp.Compare(abs64(b.DeltaPerStep), abs64(a.DeltaPerStep)), cmp.Compare(abs64(b.Delta), abs64(a.Delta)), strings.Compare(a.Name, b.Name))
	})
	if top > 0 && len(out) > top {
		out = out[:top]
	}
	return out
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Compare diffs two sides, keeping the top movers of each table.
func Compare(base, head *Side, top int) *Diff {
	d := &Diff{Base: base.Source, Head: head.Source, BaseVerdict: base.LeakVerdict, HeadVerdict: head.LeakVerdict}
	d.Metrics = []MetricDelta{
		delta("peak_allocated", base.PeakAllocatedBytes, head.PeakAllocatedBytes),
		delta("peak_reserved", base.PeakReservedBytes, head.PeakReservedBytes),
		delta("growth_per_step", base.GrowthBytesPerStep, head.GrowthBytesPerStep),
	}
	d.Operators = movers(base.Operators, head.Operators, base.Steps, head.Steps, top)
	d.SitesAlloc = movers(base.SiteAlloc, head.SiteAlloc, base.Steps, head.Steps, top)
	// Bytes alive at the end are not per step: compare them whole.
	d.SitesLive = movers(base.SiteLive, head.SiteLive, 0, 0, top)
	known := map[string]bool{}
	for _, s := range base.Suspects {
		known[site.Label(s.Stack, s.Operator)] = true
	}
	d.HeadSuspects = head.Suspects
	for _, s := range head.Suspects {
		if !known[site.Label(s.Stack, s.Operator)] {
			d.NewSuspects = append(d.NewSuspects, s)
		}
	}
	for i := 0; i < max(len(base.StepSurvivors), len(head.StepSurvivors)); i++ {
		var p [2]int64
		p[0], p[1] = -1, -1
		if i < len(base.StepSurvivors) {
			p[0] = base.StepSurvivors[i]
		}
		if i < len(head.StepSurvivors) {
			p[1] = head.StepSurvivors[i]
		}
		d.StepSurvivors = append(d.StepSurvivors, p)
	}
	if len(base.StepPeakAllocated) > 0 && len(head.StepPeakAllocated) > 0 {
		d.StepPeakAllocated = &[2][]int64{base.StepPeakAllocated, head.StepPeakAllocated}
	}
	d.Changed = len(d.Operators) > 0 || len(d.SitesAlloc) > 0 || len(d.NewSuspects) > 0 || d.BaseVerdict != d.HeadVerdict
	for _, m := range d.Metrics {
		if m.Delta != 0 {
			d.Changed = true
		}
	}
	return d
}

// Budget is one --fail-if condition: "peak_allocated>+5%",
// "peak_reserved>+512MiB", "growth_per_step>1MiB", "new_suspects>0".
type Budget struct {
	Text     string
	Metric   string
	Relative bool // +N% of base
	Increase bool // +N (bytes) over base
	Value    float64
}

var budgetRe = regexp.MustCompile(`^\s*([a-z_]+)\s*>\s*(\+)?\s*(.*?)\s*$`)

// Metrics are the names --fail-if accepts.
var Metrics = []string{"peak_allocated", "peak_reserved", "growth_per_step", "new_suspects"}

// ParseBudget reads one --fail-if condition.
func ParseBudget(s string) (Budget, error) {
	m := budgetRe.FindStringSubmatch(s)
	if m == nil {
		return Budget{}, fmt.Errorf("bad condition %q: want METRIC>VALUE, METRIC>+N%% or METRIC>+N<unit> (units B, KiB, MiB, GiB)", s)
	}
	b := Budget{Text: strings.TrimSpace(s), Metric: m[1]}
	if !slices.Contains(Metrics, b.Metric) {
		return Budget{}, fmt.Errorf("bad condition %q: unknown metric %q (want one of %s)", s, b.Metric, strings.Join(Metrics, ", "))
	}
	if pct, ok := strings.CutSuffix(m[3], "%"); ok {
		if m[2] != "+" {
			return Budget{}, fmt.Errorf("bad condition %q: a percentage is a change, write >+%s", s, m[3])
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return Budget{}, fmt.Errorf("bad condition %q: bad percentage %q", s, m[3])
		}
		b.Relative, b.Value = true, v
		return b, nil
	}
	// The one size syntax of every flag and rules file (memtimeline.ParseBytes).
	v, err := memtimeline.ParseBytes(m[3])
	if err != nil {
		return Budget{}, fmt.Errorf("bad condition %q: %w", s, err)
	}
	b.Increase, b.Value = m[2] == "+", float64(v)
	return b, nil
}

// Exceeded reports whether the diff breaks the budget, and how.
func (b Budget) Exceeded(d *Diff) (bool, string) {
	if b.Metric == "new_suspects" {
		n := float64(len(d.NewSuspects))
		return n > b.Value, fmt.Sprintf("%d new leak suspects", len(d.NewSuspects))
	}
	var m MetricDelta
	for _, x := range d.Metrics {
		if x.Metric == b.Metric {
			m = x
		}
	}
	switch {
	case b.Relative:
		if m.Base == 0 {
			return m.Head > 0, fmt.Sprintf("%s went from 0 to %s", b.Metric, memtimeline.FormatBytes(m.Head))
		}
		return m.Pct > b.Value, fmt.Sprintf("%s changed %+.1f%% (%s -> %s)", b.Metric, m.Pct, memtimeline.FormatBytes(m.Base), memtimeline.FormatBytes(m.Head))
	case b.Increase:
		return float64(m.Delta) > b.Value, fmt.Sprintf("%s changed by %s", b.Metric, signedBytes(m.Delta))
	default:
		return float64(m.Head) > b.Value, fmt.Sprintf("%s is %s", b.Metric, memtimeline.FormatBytes(m.Head))
	}
}

func signedBytes(n int64) string {
	if n > 0 {
		return "+" + memtimeline.FormatBytes(n)
	}
	return memtimeline.FormatBytes(n)
}

// LeakGate is what `torchmem diff` fails on without any flag: HEAD leaks
// where BASE did not, or HEAD has a leak suspect BASE lacks that keeps at
// least threshold bytes per step. Each reason is one sentence; none means
// the leak gate passes.
func (d *Diff) LeakGate(threshold int64) []string {
	var out []string
	if d.HeadVerdict == leak.VerdictLeak && d.BaseVerdict != leak.VerdictLeak {
		why := fmt.Sprintf("HEAD leaks (BASE %s)", d.BaseVerdict)
		if len(d.HeadSuspects) > 0 {
			s := d.HeadSuspects[0]
			why = fmt.Sprintf("HEAD leaks %s per step at %s (BASE %s)", memtimeline.FormatBytes(s.BytesPerStep), site.Label(s.Stack, s.Operator), d.BaseVerdict)
		}
		out = append(out, why)
	}
	if len(out) > 0 {
		return out // the new leak's top suspect is named already
	}
	for _, s := range d.NewSuspects {
		if s.BytesPerStep >= threshold {
			out = append(out, fmt.Sprintf("new leak suspect in HEAD: %s per step at %s (threshold %s)",
				memtimeline.FormatBytes(s.BytesPerStep), site.Label(s.Stack, s.Operator), memtimeline.FormatBytes(threshold)))
		}
	}
	return out
}
