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

// stepFacts are what a run's step log says about its allocator.
type stepFacts struct {
	source                    string
	retries                   int64
	retryFirst, retryLast     int64
	retrySteps                int
	retryBeforeFirst          bool
	splitPeak, splitReserved  int64
	splitStep                 int64
	maxReserved, maxResStep   int64
	limit                     int64
	allocConf                 map[string]string
	growth                    *ReservedGrowth
	lastStep, lastReserved    int64
	hasSplit, hasRetries, any bool
	oomRetries                int64
	points                    []splitPoint
}

// splitPoint is one step's reserved and inactive split bytes.
type splitPoint struct{ step, reserved, split int64 }

func runStepFacts(ins []*Input) stepFacts {
	f := stepFacts{splitPeak: -1, limit: -1, retryFirst: -1, retryLast: -1, splitStep: -1, maxReserved: -1, lastStep: -1}
	for _, in := range ins {
		if in.StepLog == nil {
			continue
		}
		if l := in.StepLog.LimitBytes(); l > 0 && f.limit < 0 {
			f.limit = l
		}
		if in.StepLog.AllocConf != nil && f.allocConf == nil {
			f.allocConf = in.StepLog.AllocConf
		}
		for _, s := range in.StepLog.Series {
			// Retries net of the OOMs': before it raises out-of-memory the
			// allocator flushes its cache and retries once, and counts it.
			var net, oomRetries int64
			var rf, rl int64 = -1, -1
			steps, seen := 0, false
			prevR, prevO := int64(-1), int64(-1)
			for _, r := range s.Records {
				f.any = true
				if f.source == "" {
					f.source = in.Source
				}
				if r.ReservedBytes > f.maxReserved {
					f.maxReserved, f.maxResStep = r.ReservedBytes, r.Step
				}
				if r.Step >= f.lastStep {
					f.lastStep, f.lastReserved = r.Step, r.ReservedBytes
				}
				if r.InactiveSplitBytes >= 0 {
					f.hasSplit = true
					f.points = append(f.points, splitPoint{r.Step, r.ReservedBytes, r.InactiveSplitBytes})
					if r.InactiveSplitBytes > f.splitPeak {
						f.splitPeak, f.splitStep, f.splitReserved = r.InactiveSplitBytes, r.Step, r.ReservedBytes
					}
				}
				if r.AllocRetries < 0 {
					continue
				}
				seen = true
				var d, o int64
				if prevR < 0 {
					d, o = r.AllocRetries, max(r.OOMs, 0)
					if d > o {
						f.retryBeforeFirst = true
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
				f.hasRetries = true
			}
			f.oomRetries = max(f.oomRetries, oomRetries)
			if net > f.retries {
				f.retries, f.retryFirst, f.retryLast, f.retrySteps, f.source = net, rf, rl, steps, in.Source
			}
			if f.growth == nil {
				if g := reservedGrowth(s.Records); g != nil {
					g.Source = in.Source
					f.growth = g
				}
			}
		}
	}
	if f.growth != nil && f.allocConf != nil {
		f.growth.AllocConf = formatAllocConf(f.allocConf)
	}
	return f
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
	rises := 0
	for i := 1; i < n; i++ {
		if res[i] > res[i-1] {
			rises++
		}
	}
	if z < mkZ || growth < reservedGrowthMinBytes || growth < 0.1*res[0] || res[n-1] <= early || rises < 3 || math.Abs(allocChange) > growth/10 {
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
func processLimit(f stepFacts, ooms []OOMAnswer, ins []*Input) (int64, string) {
	if f.limit > 0 {
		return f.limit, limitLogged
	}
	for _, o := range ooms {
		if o.Cause == OOMProcessLimit && o.ReservedBytes > 0 {
			return max(o.ReservedBytes, f.maxReserved), limitOOM
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
	if f.hasRetries && ans != nil && ans.AllocRetries > 0 {
		// torch's counter net of the OOMs' own retries.
		ans.AllocRetries = f.retries
		switch {
		case f.retries > 0:
			ans.Retries = fmt.Sprintf("%d cudaMalloc retries in %d steps (step log)", f.retries, f.retrySteps) + retryMeaning
			if f.oomRetries > 0 {
				ans.Retries += fmt.Sprintf("; %d more came with the OOM (the allocator flushes its cache once before it raises out-of-memory)", f.oomRetries)
			}
		default:
			ans.Retries = fmt.Sprintf("%d cudaMalloc retries, each the OOM's own (the allocator flushes its cache once before it raises out-of-memory): no retry cost besides the OOM", f.oomRetries)
		}
	}
	if f.retries > 0 {
		s := fmt.Sprintf("%d cudaMalloc retries", f.retries)
		switch {
		case f.retryFirst >= 0 && f.retryFirst != f.retryLast:
			s += fmt.Sprintf(" at steps %d-%d", f.retryFirst, f.retryLast)
		case f.retryFirst >= 0:
			s += fmt.Sprintf(" at step %d", f.retryFirst)
		}
		if f.retryBeforeFirst {
			s += " (counting those before the log's first line)"
		}
		costs, kinds = append(costs, s+" (each a cache flush and a synchronize)"), append(kinds, CostAllocRetries)
	} else if !f.hasRetries && ans != nil && ans.AllocRetries > 0 {
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
	split, splitStep := f.splitPeak, f.splitStep
	if !f.hasSplit && ans != nil && ans.WastedBytes > 0 && strings.Contains(ans.Wasted, "split") {
		split = ans.WastedBytes
	}
	headroom := int64(-1)
	if limit > 0 {
		headroom = max(0, limit-max(f.maxReserved, 0))
		if limitKind == limitLogged {
			// Only a logged limit: a process-limit OOM bounds it from
			// below only, and a split under 64 MiB serves few requests.
			// The step whose split most exceeds its headroom.
			var worst *splitPoint
			for i := range f.points {
				p := &f.points[i]
				if p.reserved > 0 && p.split >= fragMinSplitBytes && p.split > limit-p.reserved && (worst == nil || p.split-(limit-p.reserved) > worst.split-(limit-worst.reserved)) {
					worst = p
				}
			}
			if worst != nil {
				costs = append(costs, fmt.Sprintf("at step %d reserved %s left %s under the process's limit while %s sat split inside used segments (a request larger than the headroom needs a retry or fails)",
					worst.step, mb(worst.reserved), mb(max(0, limit-worst.reserved)), mb(worst.split)))
				kinds = append(kinds, CostSplitOverHeadroom)
			}
		}
	}
	if g := f.growth; g != nil {
		costs, kinds = append(costs, g.Reason), append(kinds, CostReservedGrowth)
	}
	if ans == nil {
		if len(costs) == 0 && !f.any {
			return nil
		}
		ans = &FragAnswer{Source: f.source, Verdict: frag.VerdictUnknown}
		if f.hasSplit && split >= 0 {
			ans.Verdict, ans.WastedBytes, ans.Wasted = frag.VerdictOK, split, "free but split inside used segments at the worst step (step log)"
		}
	}
	ans.Costs, ans.HeadroomBytes, ans.LimitBytes, ans.ReservedGrowth = kinds, headroom, limit, f.growth
	if ans.Costs == nil {
		ans.Costs = []string{}
	}
	if f.allocConf != nil {
		ans.AllocConf = formatAllocConf(f.allocConf)
	}
	figure := ""
	if split >= 0 && (f.hasSplit || ans.WastedBytes == split) {
		figure = mb(split) + " split inside used segments"
		if splitStep >= 0 && f.splitPeak > 0 {
			figure += fmt.Sprintf(" at the worst step (step %d)", splitStep)
		}
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
	if !f.hasRetries && ans.AllocRetries == 0 {
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
