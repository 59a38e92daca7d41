package rules

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/rules/frag"
)

// FragAnswer is the fragmentation verdict with the bytes it wastes.
type FragAnswer struct {
	Source      string `json:"source"`
	Verdict     string `json:"verdict"`
	WastedBytes int64  `json:"wasted_bytes"`
	// Wasted says what WastedBytes measures.
	Wasted string `json:"wasted"`
	Reason string `json:"reason"`
	// AllocRetries is how often the allocator gave its cache back and
	// retried a cudaMalloc during the run (torch's num_alloc_retries, from
	// a step log or memory_summary() tables, else the trace's window);
	// Retries says so in a sentence, with what it means. Zero: none seen.
	AllocRetries int64  `json:"alloc_retries,omitempty"`
	Retries      string `json:"retries,omitempty"`
	// Costs are what fragmentation cost (CostAllocRetries, ...): the
	// verdict is fragmented only with one. Cost says it in a sentence,
	// or the figure and that it cost nothing.
	Costs []string `json:"costs"`
	Cost  string   `json:"cost,omitempty"`
	// LimitBytes is what the process may use (-1 not recorded) and
	// HeadroomBytes what was left under it at the worst step (-1).
	LimitBytes    int64 `json:"limit_bytes"`
	HeadroomBytes int64 `json:"headroom_bytes"`
	// ReservedGrowth: reserved rising while allocated stays flat.
	ReservedGrowth *ReservedGrowth `json:"reserved_growth,omitempty"`
	// AllocConf is the allocator settings in the process's environment
	// (steps log); Settings what the snapshot says against them.
	AllocConf string `json:"alloc_conf,omitempty"`
	Settings  string `json:"settings,omitempty"`
}

// judgeFrag prefers a snapshot (it sees inside segments) to a trace.
func judgeFrag(ins []*Input, o JudgeOptions) *FragAnswer {
	var ans *FragAnswer
	for _, in := range ins {
		if !in.Is(SourceSnapshot) {
			continue
		}
		if in.IsDigest() {
			if in.Digest.Verdict.Frag != nil {
				f := *in.Digest.Verdict.Frag
				return &f
			}
			continue
		}
		rep := in.SnapshotReport()
		if rep.Stats.ReservedBytes == 0 {
			continue
		}
		// One judgment with the snapshot.inactive-split rule and frag
		// (frag/snapshot.go): per pool and stream, over the rule's
		// threshold (20% by default) and 64 MiB.
		j := frag.JudgeSnapshot(rep, o.SnapshotSplit)
		return &FragAnswer{Source: in.Source, Verdict: j.Verdict, WastedBytes: j.InactiveSplitBytes, Wasted: "free but split inside used segments (snapshot)", Reason: j.Reason}
	}
	for _, in := range ins {
		if !in.Is(SourceTrace) {
			continue
		}
		if in.IsDigest() {
			a := in.Digest.Verdict.Frag
			if a == nil || a.Verdict == frag.VerdictUnknown && ans != nil {
				continue
			}
			if ans == nil || (a.Verdict == frag.VerdictFragmented && ans.Verdict != frag.VerdictFragmented) || (a.Verdict == ans.Verdict && a.WastedBytes > ans.WastedBytes) {
				f := *a
				ans = &f
			}
			continue
		}
		f := fragJudged(in, o.Frag) // the rules' thresholds in force
		if f.Verdict == frag.VerdictUnknown && ans != nil {
			continue
		}
		a := &FragAnswer{Source: in.Source, Verdict: f.Verdict, Reason: f.Reason}
		if f.GapAtPeak != nil {
			a.WastedBytes, a.Wasted = f.GapAtPeak.Gap, "idle in the cache at peak allocated (reserved - allocated)"
		}
		if f.Signal(frag.ReservedGap).Fired {
			// What fragmentation cost: segments added while their pool
			// held the requested bytes idle (rules/frag).
			a.WastedBytes, a.Wasted = f.FragmentedMissBytes, "reserved by new segments while their pool held the requested bytes idle"
		}
		var fired []string
		for _, s := range f.Signals {
			if s.Fired {
				fired = append(fired, s.Detail)
			}
		}
		switch {
		case f.Verdict == frag.VerdictFragmented:
			a.Reason = f.Reason // leads with the bytes wasted
		case len(fired) > 0:
			a.Reason = strings.Join(fired, "; ")
		case f.Verdict == frag.VerdictOK:
			a.Reason = "no small-block flood, no new segments while the cache held the bytes, no cudaMalloc churn"
		}
		if ans == nil || (a.Verdict == frag.VerdictFragmented && ans.Verdict != frag.VerdictFragmented) || (a.Verdict == ans.Verdict && a.WastedBytes > ans.WastedBytes) {
			ans = a
		}
	}
	if ans != nil && ans.Verdict != frag.VerdictUnknown {
		return ans
	}
	for _, in := range ins { // without a trace that can tell, memory_summary() tables
		if a := memSummaryFrag(in, o.SnapshotSplit); a != nil {
			return a
		}
	}
	return ans
}

// addRetries tells how often the allocator freed its cache and retried: a
// run at its memory limit, one step from an OOM, whatever the frag verdict.
// torch's own counter (a step log or memory_summary() tables) covers the
// run; a trace sees its window only.
func addRetries(ans *FragAnswer, ins []*Input) *FragAnswer {
	var n int64
	var steps, records int
	from, what := "", ""
	for _, in := range ins {
		if in.StepLog == nil { // a memory_summary() log comes with its tables as steps
			continue
		}
		for _, s := range in.StepLog.Series {
			first, prev := int64(-1), int64(-1)
			var up, seen int
			for _, r := range s.Records {
				if r.AllocRetries < 0 {
					continue
				}
				seen++
				if first < 0 {
					first = r.AllocRetries
				}
				if prev >= 0 && r.AllocRetries > prev {
					up++
				}
				prev = r.AllocRetries
			}
			if first >= 0 && prev-first > n {
				n, steps, records, from = prev-first, up, seen, in.Source
				what = "step log"
				if in.Is(SourceMemSummary) {
					what = "memory_summary()"
				}
			}
		}
	}
	if n > 0 {
		sentence := fmt.Sprintf("%d cudaMalloc retries in %d of %d steps (%s)", n, steps, records, what) + retryMeaning
		return withRetries(ans, from, n, sentence)
	}
	for _, in := range ins {
		if !in.Has(SourceTrace) {
			continue
		}
		if f := in.Frag(); f.AllocRetries > n {
			n, from = f.AllocRetries, in.Source
		}
	}
	if n == 0 {
		return ans
	}
	sentence := fmt.Sprintf("%d cudaMalloc retries in the profiled window (trace)", n) + retryMeaning
	return withRetries(ans, from, n, sentence)
}

// retryMeaning says what allocator retries mean, after their count.
const retryMeaning = ": at its limit the allocator flushed its cache; " + frag.AdviceLowerPeak + " (near an OOM, and slow)"

func withRetries(ans *FragAnswer, from string, n int64, sentence string) *FragAnswer {
	if ans == nil {
		ans = &FragAnswer{Source: from, Verdict: frag.VerdictUnknown, Reason: "no trace or snapshot to judge the cache by"}
	}
	ans.AllocRetries, ans.Retries = n, sentence
	return ans
}
