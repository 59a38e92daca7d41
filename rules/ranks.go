package rules

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/torchmem/torchmem/internal/rankname"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/leak"
)

// The cross-rank view: in a distributed job the ranks run the same code,
// so a rank that differs from the others (it leaks where they do not, it
// keeps more per step, its peak or its step time stands out) is where to
// look first. It is computed from the verdicts (one per run and rank), so
// it is the same from the traces as from their digests.

// RankRow is one rank's figures beside the others'.
type RankRow struct {
	Name         string `json:"name"`
	Run          string `json:"run,omitempty"`
	Rank         int64  `json:"rank"`
	Leak         string `json:"leak"`
	BytesPerStep int64  `json:"bytes_per_step"`
	// PeakAllocatedBytes is -1 when no input of the rank records it (a
	// trace without memory events, snapshots alone).
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
	// StepTimeNs is the median ProfilerStep time of the rank's traces (0:
	// none).
	StepTimeNs int64 `json:"step_time_ns"`
	Outlier    bool  `json:"outlier"`
	// Differs says how the rank differs from the others, one phrase per
	// figure ("leaks 8.00 MB per step where the others do not").
	Differs []string `json:"differs,omitempty"`
}

// CrossRank compares the ranks of a job.
type CrossRank struct {
	Rows []RankRow `json:"ranks"`
	// Outliers names the ranks that differ, Headline says it in a line.
	Outliers []int64 `json:"outliers"`
	Headline string  `json:"headline"`
}

// Thresholds past which a rank's figure differs from the others': a
// fraction of the reference (the median; with two ranks, the smaller),
// and at least an absolute amount so that noise on tiny figures is not
// named.
const (
	rankBytesFrac = 0.25
	rankBytesMin  = 1 << 20
	rankPeakFrac  = 0.10
	rankPeakMin   = 16 << 20
	rankTimeFrac  = 0.20
	rankTimeMinNs = 1_000_000
)

// CompareRanks puts the ranks of each run side by side and names those
// that differ from the other ranks of their run; nil when no run has two
// ranks. Runs are compared apart (a directory of several recordings is
// several runs, each with its ranks): a run's rank 0 is not an outlier of
// another run's ranks.
func CompareRanks(vs []Verdict) *CrossRank {
	var order []string
	byRun := map[string][]Verdict{}
	for _, v := range vs {
		if v.Rank < 0 {
			continue
		}
		k := runKey(v)
		if _, ok := byRun[k]; !ok {
			order = append(order, k)
		}
		byRun[k] = append(byRun[k], v)
	}
	var out *CrossRank
	var headlines []string
	for _, k := range order {
		cr := compareRun(byRun[k])
		if cr == nil {
			continue
		}
		if out == nil {
			out = &CrossRank{Rows: []RankRow{}, Outliers: []int64{}}
		}
		out.Rows = append(out.Rows, cr.Rows...)
		for _, o := range cr.Outliers {
			if !slices.Contains(out.Outliers, o) {
				out.Outliers = append(out.Outliers, o)
			}
		}
		h := cr.Headline
		if j := byRun[k][0].Job; j != "" {
			h = j + "; " + h
		}
		if len(byRun) > 1 {
			h = runName(byRun[k][0]) + ": " + h
		}
		headlines = append(headlines, h)
	}
	if out != nil {
		out.Headline = strings.Join(headlines, "; ")
	}
	return out
}

// runKey is the run a verdict belongs to: its folder (a per-rank folder's
// parent: job/rank0 and job/rank1 are one job) and the snippet's run id
// (host and start time), if any.
func runKey(v Verdict) string {
	dir := ""
	if len(v.Sources) > 0 {
		dir = groupDir(v.Sources[0])
		if rankname.IsFolder(filepath.Base(dir)) {
			dir = filepath.Dir(dir)
		}
	}
	return dir + "\x00" + v.Run
}

// runName names a run in a headline: its folder (and run id).
func runName(v Verdict) string {
	k := strings.Replace(runKey(v), "\x00", string(filepath.Separator), 1)
	return strings.TrimSuffix(k, string(filepath.Separator))
}

// compareRun compares the ranks of one run (nil with fewer than two).
func compareRun(vs []Verdict) *CrossRank {
	var rows []RankRow
	ranks := map[int64]bool{}
	for _, v := range vs {
		ranks[v.Rank] = true
		r := RankRow{Name: v.Name, Run: v.Run, Rank: v.Rank, Leak: v.Leak.Verdict, BytesPerStep: v.Leak.BytesPerStep, PeakAllocatedBytes: -1}
		if v.Peak != nil {
			r.PeakAllocatedBytes = v.Peak.AllocatedBytes
		}
		var times []int64
		for _, in := range v.Inputs {
			if t := in.StepTimeNs(); t > 0 {
				times = append(times, t)
			}
		}
		if len(times) > 0 {
			slices.Sort(times)
			r.StepTimeNs = times[len(times)/2]
		}
		rows = append(rows, r)
	}
	if len(ranks) < 2 {
		return nil
	}
	slices.SortStableFunc(rows, func(a, b RankRow) int { return cmp.Or(cmp.Compare(a.Rank, b.Rank), strings.Compare(a.Run, b.Run)) })
	cr := &CrossRank{Rows: rows, Outliers: []int64{}}

	// The leak verdict: the minority when the others agree.
	verdicts := make([]string, len(rows))
	for i, r := range rows {
		verdicts[i] = r.Leak
	}
	majority := majorityOf(verdicts)
	for i, odd := range minorityOutliers(verdicts) {
		if !odd {
			continue
		}
		r := &rows[i]
		switch {
		case r.Leak == leak.VerdictLeak:
			r.Differs = append(r.Differs, fmt.Sprintf("leaks %s per step where the others do not", memtimeline.FormatBytes(r.BytesPerStep)))
		case majority == leak.VerdictLeak:
			r.Differs = append(r.Differs, fmt.Sprintf("%s where the others leak", r.Leak))
		default:
			r.Differs = append(r.Differs, fmt.Sprintf("leak verdict %s where the others are %s", r.Leak, majority))
		}
	}
	figure := func(name string, get func(RankRow) int64, frac float64, floor int64, show func(int64) string) {
		var vals []int64
		for _, r := range rows {
			if v := get(r); v > 0 || name == "bytes per step" {
				vals = append(vals, v)
			}
		}
		if len(vals) < 2 {
			return
		}
		slices.Sort(vals)
		ref := vals[len(vals)/2]
		if len(vals) == 2 {
			ref = vals[0] // of two, the larger is the one that stands out
		}
		for i := range rows {
			r := &rows[i]
			v := get(*r)
			if v <= 0 && name != "bytes per step" {
				continue
			}
			d := v - ref
			if math.Abs(float64(d)) <= max(frac*float64(ref), float64(floor)) {
				continue
			}
			if name == "bytes per step" && r.Leak == leak.VerdictLeak && slices.ContainsFunc(r.Differs, func(s string) bool { return strings.HasPrefix(s, "leaks ") }) {
				continue // said with the verdict
			}
			word := "above"
			if d < 0 {
				word = "below"
			}
			pct := ""
			if ref > 0 {
				pct = fmt.Sprintf(", %+.0f%%", 100*float64(d)/float64(ref))
			}
			r.Differs = append(r.Differs, fmt.Sprintf("%s %s, %s the others' %s%s", name, show(v), word, show(ref), pct))
		}
	}
	figure("bytes per step", func(r RankRow) int64 { return r.BytesPerStep }, rankBytesFrac, rankBytesMin, memtimeline.FormatBytes)
	figure("peak allocated", func(r RankRow) int64 { return r.PeakAllocatedBytes }, rankPeakFrac, rankPeakMin, memtimeline.FormatBytes)
	figure("step time", func(r RankRow) int64 { return r.StepTimeNs }, rankTimeFrac, rankTimeMinNs, func(ns int64) string { return memtimeline.FormatDuration(time.Duration(ns)) })

	var named []string
	for i := range rows {
		r := &rows[i]
		if len(r.Differs) > 0 {
			r.Outlier = true
			if !slices.Contains(cr.Outliers, r.Rank) {
				cr.Outliers = append(cr.Outliers, r.Rank)
			}
			named = append(named, fmt.Sprintf("rank %d (%s)", r.Rank, strings.Join(r.Differs, "; ")))
		}
	}
	switch {
	case len(named) == 0:
		cr.Headline = fmt.Sprintf("%d ranks alike: the same leak verdict, bytes per step, peak and step time within bounds", len(ranks))
	case len(named) > 5:
		cr.Headline = fmt.Sprintf("%d of %d ranks differ from the others: %s; ...", len(named), len(ranks), strings.Join(named[:5], ", "))
	default:
		cr.Headline = fmt.Sprintf("%d of %d ranks differ from the others: %s", len(named), len(ranks), strings.Join(named, ", "))
	}
	return cr
}

// majorityOf is the value most of vals hold (ties: the smaller).
func majorityOf(vals []string) string {
	count := map[string]int{}
	for _, v := range vals {
		count[v]++
	}
	majority, best := "", 0
	for v, n := range count {
		if n > best || (n == best && v < majority) {
			majority, best = v, n
		}
	}
	return majority
}

// minorityOutliers marks the values in the minority when the others
// agree (the one rank that leaks, or the one that does not): with more
// than two, only when one value holds a strict majority; of two that
// differ, the one that is not clean.
func minorityOutliers(vals []string) []bool {
	out := make([]bool, len(vals))
	if len(vals) < 2 {
		return out
	}
	count := map[string]int{}
	for _, v := range vals {
		count[v]++
	}
	if len(count) < 2 {
		return out
	}
	majority, best := "", 0
	for v, n := range count {
		if n > best || (n == best && v < majority) {
			majority, best = v, n
		}
	}
	if best*2 <= len(vals) && len(vals) > 2 {
		return out // no clear majority: nothing stands out
	}
	for i, v := range vals {
		out[i] = v != majority
	}
	return out
}
