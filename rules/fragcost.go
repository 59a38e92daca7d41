package rules

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/frag"
)

// Fragmentation said by what it cost. Free memory split inside segments
// is the caching allocator working as designed: it becomes a problem when
// it costs something. FRAGMENTED needs one of these costs; otherwise the
// answer gives the figure measured and says that it cost nothing.
const (
	// CostAllocRetries: cudaMalloc failed, the allocator flushed its
	// cache (a device synchronize and cudaFree of every unused segment)
	// and retried (torch's num_alloc_retries).
	CostAllocRetries = "alloc_retries"
	// CostFragmentationOOM: an OOM while the cache held enough free
	// bytes for the request, none in a piece it could use.
	CostFragmentationOOM = "fragmentation_oom"
	// CostSplitOverHeadroom: reserved at the process's limit, with more
	// split free memory than the headroom left under it.
	CostSplitOverHeadroom = "split_over_headroom"
	// CostReservedGrowth: reserved keeps growing while allocated does not.
	CostReservedGrowth = "reserved_growth"
)

// ReservedGrowth is reserved memory rising step over step while allocated
// stays flat: the cache adding segments it does not reuse (an allocator
// pathology, not a tensor leak).
type ReservedGrowth struct {
	Source    string `json:"source"`
	FirstStep int64  `json:"first_step"`
	LastStep  int64  `json:"last_step"`
	// GrowthBytes is reserved's rise over the steps; BytesPerStep its
	// robust slope (Theil-Sen); AllocatedChangeBytes allocated's change
	// over the same steps (the same slope times the steps).
	GrowthBytes          int64   `json:"growth_bytes"`
	BytesPerStep         int64   `json:"bytes_per_step"`
	AllocatedChangeBytes int64   `json:"allocated_change_bytes"`
	Rises                int     `json:"rises"`
	Z                    float64 `json:"mann_kendall_z"`
	// AllocConf is the allocator settings the run recorded.
	AllocConf string `json:"alloc_conf,omitempty"`
	Reason    string `json:"reason"`
	Advice    string `json:"advice"`
}

// reservedGrowthMinBytes: reserved must grow at least this much (and 10%)
// to be named; reservedGrowthMinSteps: over at least this many steps.
const (
	reservedGrowthMinBytes = 64 << 20
	reservedGrowthMinSteps = 8
	// mkZ is the one-sided Mann-Kendall significance (p = 0.001).
	mkZ = 3.09
)

// AdviceReservedGrowth says what to do when reserved grows and allocated
// does not.
const AdviceReservedGrowth = "Reserved grows while allocated does not: the cache keeps adding segments it does not reuse. " +
	"Check the allocator settings (expandable_segments together with max_split_size_mb has done this: pytorch/pytorch#193400); " +
	"try the run without max_split_size_mb, or with " + frag.ExpandableSegments + " if it is off; keep tensor shapes stable from step to step; " +
	"torch.cuda.empty_cache() every N steps only hides it. An allocator snapshot (TorchMemProfile) shows which segments hold nothing."

// StepFacts are what one input's step log says about its allocator: its
// retries (net of the OOMs' own), split peak, reserved, limit, settings
// and reserved growth. A summary keeps them, so that the verdict from
// summaries is the one from the files.
type StepFacts struct {
	Source       string `json:"source"`
	Retries      int64  `json:"retries"`
	RetryFirst   int64  `json:"retry_first_step"`
	RetryLast    int64  `json:"retry_last_step"`
	RetrySteps   int    `json:"retry_steps"`
	RetryRecords int    `json:"retry_records"`
	// What names the log: "step log" or "memory_summary()".
	What             string            `json:"what"`
	RetryBeforeFirst bool              `json:"retry_before_first,omitempty"`
	OOMRetries       int64             `json:"oom_retries"`
	HasRetries       bool              `json:"has_retries"`
	HasSplit         bool              `json:"has_split"`
	SplitPeak        int64             `json:"split_peak_bytes"`
	SplitStep        int64             `json:"split_peak_step"`
	MaxReserved      int64             `json:"max_reserved_bytes"`
	LastStep         int64             `json:"last_step"`
	LastReserved     int64             `json:"last_reserved_bytes"`
	Limit            int64             `json:"limit_bytes"`
	AllocConf        map[string]string `json:"alloc_conf,omitempty"`
	HistoryMax       int64             `json:"history_max_entries"`
	Points           []SplitPoint      `json:"split_points,omitempty"`
	Growth           *ReservedGrowth   `json:"reserved_growth,omitempty"`
	SecPerStep       float64           `json:"seconds_per_step,omitempty"`
}

// SplitPoint is a step whose inactive split is at least 64 MiB, with
// reserved then.
type SplitPoint struct {
	Step     int64 `json:"step"`
	Reserved int64 `json:"reserved"`
	Split    int64 `json:"split"`
}

// maxSplitPoints bounds the points kept per input.
const maxSplitPoints = 4096

func newStepFacts() StepFacts {
	return StepFacts{SplitPeak: -1, Limit: -1, RetryFirst: -1, RetryLast: -1, SplitStep: -1, MaxReserved: -1, LastStep: -1, LastReserved: -1, HistoryMax: -1}
}

// StepFacts are the input's step-log facts (memoized; nil without a log).
func (in *Input) StepFacts() *StepFacts {
	if in.IsDigest() {
		return in.Digest.StepFacts
	}
	return Memo(in, "verdict:step-facts", func() *StepFacts {
		if in.StepLog == nil {
			return nil
		}
		f := newStepFacts()
		f.Source, f.Limit, f.AllocConf, f.HistoryMax = in.Source, in.StepLog.LimitBytes(), in.StepLog.AllocConf, in.StepLog.HistoryMaxEntries
		f.What = "step log"
		if in.Is(SourceMemSummary) {
			f.What = "memory_summary()"
		}
		for _, s := range in.StepLog.Series {
			addSeriesFacts(&f, s.Records)
		}
		return &f
	})
}

func addSeriesFacts(f *StepFacts, recs []steplog.Record) {
	// Retries net of the OOMs': before it raises out-of-memory the
	// allocator flushes its cache and retries once, and counts it.
	var net, oomRetries int64
	var rf, rl int64 = -1, -1
	steps, seen, records := 0, false, 0
	prevR, prevO := int64(-1), int64(-1)
	var gaps []float64
	for i, r := range recs {
		if i > 0 {
			a := recs[i-1]
			if a.HasTime && r.HasTime && r.Step > a.Step && r.Time > a.Time {
				gaps = append(gaps, (r.Time-a.Time)/float64(r.Step-a.Step))
			}
		}
		if r.ReservedBytes > f.MaxReserved {
			f.MaxReserved = r.ReservedBytes
		}
		if r.Step >= f.LastStep {
			f.LastStep, f.LastReserved = r.Step, r.ReservedBytes
		}
		if r.InactiveSplitBytes >= 0 {
			f.HasSplit = true
			if r.InactiveSplitBytes >= fragMinSplitBytes && r.ReservedBytes > 0 && len(f.Points) < maxSplitPoints {
				f.Points = append(f.Points, SplitPoint{r.Step, r.ReservedBytes, r.InactiveSplitBytes})
			}
			if r.InactiveSplitBytes > f.SplitPeak {
				f.SplitPeak, f.SplitStep = r.InactiveSplitBytes, r.Step
			}
		}
		if r.AllocRetries < 0 {
			continue
		}
		seen = true
		records++
		var d, o int64
		if prevR < 0 {
			d, o = r.AllocRetries, max(r.OOMs, 0)
			if d > o {
				f.RetryBeforeFirst = true
			}
		} else {
			d = r.AllocRetries - prevR
			if r.OOMs >= 0 && prevO >= 0 {
				o = r.OOMs - prevO
			}
		}
		prevR, prevO = r.AllocRetries, r.OOMs
		ownOOM := min(max(o, 0), max(d, 0))
		oomRetries += ownOOM
		if d -= ownOOM; d > 0 {
			net += d
			steps++
			if rf < 0 {
				rf = r.Step
			}
			rl = r.Step
		}
	}
	if seen {
		f.HasRetries = true
	}
	f.OOMRetries = max(f.OOMRetries, oomRetries)
	if net > f.Retries {
		f.Retries, f.RetryFirst, f.RetryLast, f.RetrySteps, f.RetryRecords = net, rf, rl, steps, records
	}
	if len(gaps) > 0 && f.SecPerStep == 0 {
		f.SecPerStep = medianOf(gaps)
	}
	if f.Growth == nil {
		if g := reservedGrowth(recs); g != nil {
			g.Source = f.Source
			if f.AllocConf != nil {
				g.AllocConf = formatAllocConf(f.AllocConf)
			}
			f.Growth = g
		}
	}
}

// runStepFacts merges the step-log facts of a run's inputs.
func runStepFacts(ins []*Input) StepFacts {
	out := newStepFacts()
	any := false
	for _, in := range ins {
		f := in.StepFacts()
		if f == nil {
			continue
		}
		if !any {
			out.Source = f.Source
		}
		any = true
		if out.Limit < 0 {
			out.Limit = f.Limit
		}
		if out.AllocConf == nil {
			out.AllocConf = f.AllocConf
		}
		out.HistoryMax = max(out.HistoryMax, f.HistoryMax)
		if f.Retries > out.Retries {
			out.Retries, out.RetryFirst, out.RetryLast, out.RetrySteps, out.RetryBeforeFirst, out.Source = f.Retries, f.RetryFirst, f.RetryLast, f.RetrySteps, f.RetryBeforeFirst, f.Source
			out.RetryRecords, out.What = f.RetryRecords, f.What
		}
		out.OOMRetries = max(out.OOMRetries, f.OOMRetries)
		out.HasRetries = out.HasRetries || f.HasRetries
		out.HasSplit = out.HasSplit || f.HasSplit
		if f.SplitPeak > out.SplitPeak {
			out.SplitPeak, out.SplitStep = f.SplitPeak, f.SplitStep
		}
		out.MaxReserved = max(out.MaxReserved, f.MaxReserved)
		if f.LastStep > out.LastStep {
			out.LastStep, out.LastReserved = f.LastStep, f.LastReserved
		}
		out.Points = append(out.Points, f.Points...)
		if out.Growth == nil {
			out.Growth = f.Growth
		}
		if out.SecPerStep == 0 {
			out.SecPerStep = f.SecPerStep
		}
	}
	if !any {
		out.Source = ""
	}
	return out
}

// formatAllocConf writes the environment's allocator settings, sorted.
func formatAllocConf(m map[string]string) string {
	if len(m) == 0 {
		return "none set (PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF unset)"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// reservedGrowth finds reserved rising regularly while allocated stays
// flat: a significant Mann-Kendall trend of reserved (after the first
// step, which warms the cache up), still rising in the last third, at
// least 64 MiB and 10%, while allocated changes by under a tenth of it.
// (A simple robust test; the growth model of memtimeline/growth replaces
// it when it lands.)
func reservedGrowth(recs []steplog.Record) *ReservedGrowth {
	var steps []int64
	var res, alloc []float64
	for i, r := range recs {
		if i == 0 || r.ReservedBytes < 0 || r.AllocatedBytes < 0 {
			continue
		}
		steps = append(steps, r.Step)
		res = append(res, float64(r.ReservedBytes))
		alloc = append(alloc, float64(r.AllocatedBytes))
	}
	n := len(res)
	if n < reservedGrowthMinSteps {
		return nil
	}
	z := mannKendallZ(res)
	slope := theilSen(steps, res)
	growth := res[n-1] - res[0]
	allocChange := theilSen(steps, alloc) * float64(steps[n-1]-steps[0])
	third := n * 2 / 3
	early := slices.Max(res[:third])
	// Regularly: rises in at least a quarter of the steps, in both
	// halves. A cache that meets a new largest shape now and then (an LM
	// with varying lengths) rises in a few steps and is not this.
	rises, firstHalf, secondHalf := 0, 0, 0
	for i := 1; i < n; i++ {
		if res[i] > res[i-1] {
			rises++
			if i < n/2 {
				firstHalf++
			} else {
				secondHalf++
			}
		}
	}
	if z < mkZ || growth < reservedGrowthMinBytes || growth < 0.1*res[0] || res[n-1] <= early || rises < max(3, (n-1)/4) || firstHalf < 2 || secondHalf < 2 || math.Abs(allocChange) > growth/10 {
		return nil
	}
	g := &ReservedGrowth{FirstStep: steps[0], LastStep: steps[n-1], GrowthBytes: int64(growth), BytesPerStep: int64(slope),
		AllocatedChangeBytes: int64(allocChange), Rises: rises, Z: z, Advice: AdviceReservedGrowth}
	g.Reason = fmt.Sprintf("reserved grew %s over steps %d-%d (%s per step, rising in %d steps, Mann-Kendall z %.1f) while allocated changed %s",
		memtimeline.FormatBytes(g.GrowthBytes), g.FirstStep, g.LastStep, memtimeline.FormatBytes(g.BytesPerStep), rises, z, signedBytes(g.AllocatedChangeBytes))
	return g
}

// theilSen is the median of the pairwise slopes (per step).
func theilSen(x []int64, y []float64) float64 {
	var s []float64
	for i := range y {
		for j := i + 1; j < len(y) && len(s) < 1<<16; j++ {
			if x[j] != x[i] {
				s = append(s, (y[j]-y[i])/float64(x[j]-x[i]))
			}
		}
	}
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mannKendallZ is the Mann-Kendall trend statistic with the tie-corrected
// variance: Z = (S - sign S) / sqrt(Var S).
func mannKendallZ(y []float64) float64 {
	n := len(y)
	var s float64
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			switch {
			case y[j] > y[i]:
				s++
			case y[j] < y[i]:
				s--
			}
		}
	}
	ties := map[float64]int{}
	for _, v := range y {
		ties[v]++
	}
	v := float64(n*(n-1)*(2*n+5)) / 18
	for _, t := range ties {
		if t > 1 {
			v -= float64(t*(t-1)*(2*t+5)) / 18
		}
	}
	if v <= 0 {
		return 0
	}
	switch {
	case s > 0:
		return (s - 1) / math.Sqrt(v)
	case s < 0:
		return (s + 1) / math.Sqrt(v)
	}
	return 0
}

// Limit kinds: how the process's memory limit is known.
const (
	limitLogged   = "logged"   // capacity x memory fraction, from the steps log
	limitOOM      = "oom"      // at least reserved at a process-limit OOM
	limitCapacity = "capacity" // the device's capacity; the fraction not recorded
)

// processLimit is what the process may use and how it is known: the
// steps log's capacity times memory fraction, a process-limit OOM (the
// cap is at least every reserved figure seen, and within one request of
// reserved at the failure), or the device's capacity when no fraction is
// recorded (-1: none).
func processLimit(f StepFacts, ooms []OOMAnswer, ins []*Input) (int64, string) {
	if f.Limit > 0 {
		return f.Limit, limitLogged
	}
	for _, o := range ooms {
		if o.Cause == OOMProcessLimit && o.ReservedBytes > 0 {
			return max(o.ReservedBytes, f.MaxReserved), limitOOM
		}
	}
	var capacity int64 = -1
	for _, o := range ooms {
		capacity = max(capacity, o.CapacityBytes)
	}
	for _, in := range ins {
		capacity = max(capacity, in.OOMFacts().CapacityBytes)
	}
	if capacity > 0 {
		return capacity, limitCapacity
	}
	return -1, ""
}

// headroomWords says the headroom under the limit, and how the limit is known.
func headroomWords(headroom, limit int64, kind string) string {
	h, l := memtimeline.FormatBytes(headroom), memtimeline.FormatBytes(limit)
	switch kind {
	case limitLogged:
		return fmt.Sprintf("%s headroom under the process's %s limit (capacity x memory fraction)", h, l)
	case limitOOM:
		return fmt.Sprintf("%s headroom under the process's limit (at least %s: its memory fraction refused a segment at the OOM)", h, l)
	case limitCapacity:
		return fmt.Sprintf("%s headroom under the device's %s (the memory fraction is not recorded)", h, l)
	}
	return "headroom not recorded"
}

// fragCost makes the fragmentation answer say what fragmentation cost:
// FRAGMENTED only with a cost, else the figure and that it cost nothing.
func fragCost(ans *FragAnswer, ooms []OOMAnswer, ins []*Input) *FragAnswer {
	f := runStepFacts(ins)
	mb := memtimeline.FormatBytes
	var costs, kinds []string
	if f.Retries > 0 {
		s := fmt.Sprintf("%d cudaMalloc retries", f.Retries)
		switch {
		case f.RetryFirst >= 0 && f.RetryFirst != f.RetryLast:
			s += fmt.Sprintf(" at steps %d-%d", f.RetryFirst, f.RetryLast)
		case f.RetryFirst >= 0:
			s += fmt.Sprintf(" at step %d", f.RetryFirst)
		}
		if f.RetryBeforeFirst {
			s += " (counting those before the log's first line)"
		}
		costs, kinds = append(costs, s+" (each a cache flush and a synchronize)"), append(kinds, CostAllocRetries)
	} else if !f.HasRetries && ans != nil && ans.AllocRetries > 0 {
		costs = append(costs, fmt.Sprintf("%d cudaMalloc retries in the profiled window (each a cache flush and a synchronize)", ans.AllocRetries))
		kinds = append(kinds, CostAllocRetries)
	}
	for _, o := range ooms {
		if o.Cause == OOMFragmentation {
			costs = append(costs, fmt.Sprintf("an OOM: %s requested while the cache held %s free at the failure, in pieces it could not use", mb(o.RequestBytes), mb(o.FreeInCacheBytes)))
			kinds = append(kinds, CostFragmentationOOM)
			break
		}
	}
	limit, limitKind := processLimit(f, ooms, ins)
	split, splitStep := f.SplitPeak, f.SplitStep
	if !f.HasSplit && ans != nil && ans.WastedBytes > 0 && strings.Contains(ans.Wasted, "split") {
		split = ans.WastedBytes
	}
	headroom := int64(-1)
	if limit > 0 {
		headroom = max(0, limit-max(f.MaxReserved, 0))
		if limitKind == limitLogged {
			// Only a logged limit: a process-limit OOM bounds it from
			// below only, and a split under 64 MiB serves few requests.
			// The step whose split most exceeds its headroom.
			var worst *SplitPoint
			for i := range f.Points {
				p := &f.Points[i]
				if p.Split > limit-p.Reserved && (worst == nil || p.Split-(limit-p.Reserved) > worst.Split-(limit-worst.Reserved)) {
					worst = p
				}
			}
			if worst != nil {
				costs = append(costs, fmt.Sprintf("at step %d reserved %s left %s under the process's limit while %s sat split inside used segments (a request larger than the headroom needs a retry or fails)",
					worst.Step, mb(worst.Reserved), mb(max(0, limit-worst.Reserved)), mb(worst.Split)))
				kinds = append(kinds, CostSplitOverHeadroom)
			}
		}
	}
	if g := f.Growth; g != nil {
		costs, kinds = append(costs, g.Reason), append(kinds, CostReservedGrowth)
	}
	if ans == nil {
		if len(costs) == 0 && f.Source == "" {
			return nil
		}
		ans = &FragAnswer{Source: f.Source, Verdict: frag.VerdictUnknown}
		if f.HasSplit && split >= 0 {
			ans.Verdict, ans.WastedBytes, ans.Wasted = frag.VerdictOK, split, "free but split inside used segments at the worst step (step log)"
		}
	}
	if f.HasRetries {
		// torch's counter over the whole log, net of the OOMs' own
		// retries (a summary and the files say the same).
		ans.AllocRetries, ans.Retries = f.Retries, ""
		switch {
		case f.Retries > 0:
			ans.Retries = fmt.Sprintf("%d cudaMalloc retries in %d of %d steps (%s)", f.Retries, f.RetrySteps, f.RetryRecords, f.What) + retryMeaning
			if f.OOMRetries > 0 {
				ans.Retries += fmt.Sprintf("; %d more came with the OOM (the allocator flushes its cache once before it raises out-of-memory)", f.OOMRetries)
			}
		case f.OOMRetries > 0:
			ans.Retries = fmt.Sprintf("%d cudaMalloc retries, each the OOM's own (the allocator flushes its cache once before it raises out-of-memory): no retry cost besides the OOM", f.OOMRetries)
		}
	}
	if f.HasSplit && f.SplitPeak > ans.WastedBytes {
		// The step log sees the split after every step; a snapshot or a
		// trace one moment or window.
		ans.WastedBytes, ans.Wasted = f.SplitPeak, "free but split inside used segments at the worst step (step log)"
	}
	ans.Costs, ans.HeadroomBytes, ans.LimitBytes, ans.ReservedGrowth = kinds, headroom, limit, f.Growth
	if ans.Costs == nil {
		ans.Costs = []string{}
	}
	if f.AllocConf != nil {
		ans.AllocConf = formatAllocConf(f.AllocConf)
	}
	figure := ""
	switch {
	case split >= 0 && (f.HasSplit || ans.WastedBytes == split):
		figure = mb(split) + " split inside used segments"
		if splitStep >= 0 && f.SplitPeak > 0 {
			figure += fmt.Sprintf(" at the worst step (step %d)", splitStep)
		}
	case ans.Wasted != "":
		figure = mb(ans.WastedBytes) + " " + ans.Wasted // a trace's gap at peak
	}
	if len(costs) > 0 {
		ans.Verdict = frag.VerdictFragmented
		ans.Cost = strings.Join(costs, "; ")
		if figure != "" {
			ans.Cost += "; " + figure
		}
		return ans
	}
	if ans.Verdict == frag.VerdictFragmented {
		// Split memory alone, with no retry, no OOM, room under the
		// limit: the allocator working as designed.
		ans.Verdict = frag.VerdictOK
		r := strings.TrimPrefix(ans.Reason, "the cache wastes memory: ")
		r = strings.Replace(r, "the cache wasted memory mid-run", "split memory mid-run", 1)
		ans.Reason = "split memory over the split rule's share, at no cost: " + r
	}
	if ans.Verdict != frag.VerdictOK {
		return ans
	}
	nothing := "it cost nothing: 0 cudaMalloc retries"
	switch {
	case f.HasRetries:
	case slices.ContainsFunc(ins, func(in *Input) bool { return in.Is(SourceTrace) }):
		nothing += " in the profiled window"
	default:
		nothing = "it cost nothing seen: no cudaMalloc retry recorded"
	}
	nothing += ", no fragmentation OOM, " + headroomWords(headroom, limit, limitKind)
	if figure != "" {
		ans.Cost = figure + "; " + nothing
	} else {
		ans.Cost = nothing
	}
	return ans
}
