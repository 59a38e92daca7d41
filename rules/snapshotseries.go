package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/growth"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// Snapshots over time are a leak series. A framework that dumps the
// allocator's state every few steps (TorchTitan's iteration_10, _20, _30;
// snapshots saved by hand with the step in their name) shows, from the
// segments' live blocks alone, which line holds more at each dump: a site
// that holds more at every dump, by regular amounts, keeps memory step
// after step. No step log, no profiler trace and no recorded history are
// needed: each block carries the stack it was allocated from when the
// history was on; without it the growth per dump is still told, the line
// is not.

// seriesDump is one snapshot of a series.
type seriesDump struct {
	in    *Input
	step  int64
	sites []snapshot.LiveSite
	// total is the live bytes outside private pools.
	total int64
}

// seriesSite is one site's live bytes at each dump.
type seriesSite struct {
	key   string
	site  snapshot.LiveSite // the site at its largest
	bytes []int64
}

// minSeriesRises is how many rises between dumps make growth: two (three
// dumps), each dump taken at the same point of its step, so that a
// transient cannot rise twice in a row by the same amount.
const minSeriesRises = 2

// snapshotSeriesEvidence judges the group's snapshots taken at known
// steps (two or more, the OOM exit dumps left out) as one series; nil when
// the group has no such series.
func snapshotSeriesEvidence(group []*Input) []LeakEvidence {
	var dumps []seriesDump
	seen := map[int64]bool{}
	for _, in := range group {
		if !in.Is(SourceSnapshot) {
			continue
		}
		if p, ok := dumpPlaceOf(in.Source); ok && p.Exit {
			continue // dumped mid-step on the way out of an OOM
		}
		st := dumpStepOf(in.Source)
		if st < 0 || seen[st] {
			continue
		}
		seen[st] = true
		d := seriesDump{in: in, step: st, sites: in.LiveSites()}
		for _, s := range d.sites {
			if s.Pool == ([2]int64{}) {
				d.total += s.Bytes
			}
		}
		dumps = append(dumps, d)
	}
	if len(dumps) < 2 {
		return nil
	}
	slices.SortFunc(dumps, func(a, b seriesDump) int { return cmp.Compare(a.step, b.step) })
	return []LeakEvidence{judgeSeries(dumps)}
}

// LiveSites are the snapshot's live blocks by site (memoized), or its
// digest's.
func (in *Input) LiveSites() []snapshot.LiveSite {
	if in.IsDigest() {
		return in.Digest.LiveSites
	}
	if !in.Has(SourceSnapshot) {
		return nil
	}
	return Memo(in, "snapshot:live-sites", in.Snapshot.LiveSites)
}

// siteKey names a live site across dumps: its user frame (line and
// function), or none for blocks with no stack.
func siteKey(s snapshot.LiveSite) string {
	if s.NoStack() {
		return ""
	}
	return fmt.Sprintf("%s\x00%d\x00%s", s.Site.Filename, s.Site.Line, s.Site.Name)
}

// seriesGrowth is the regular growth of vals (bytes at each dump) reaching
// the last dump: the rises of the last intervals, each above 0, steady per
// step (the largest at most twice the smallest; two rises within 10%) or
// each larger than the last. It returns the bytes per step (the median
// rate) and the index of the first growing dump, or ok false.
//
// With enough dumps for the growth model (memtimeline/growth: a
// staircase needs MinJumps rises) the model decides, as for every step
// series: growth (a trend, or regular jumps without fall-back, reaching
// the last dump) at its bytes per step. Three dumps are too few for it:
// then the two rises must agree.
func seriesGrowth(steps, vals []int64) (perStep int64, from int, ok bool) {
	n := len(vals)
	if p := growth.Default(); n-1 >= p.MinJumps {
		y := make([]float64, n)
		for i, v := range vals {
			y[i] = float64(v)
		}
		r := growth.Analyze(steps, y, p)
		if r.Verdict != growth.Growth || r.BytesPerStep < 0.5 {
			return 0, 0, false
		}
		// r.Start is the first dump the growth raised: from is the one
		// before it.
		first := 0
		for first < n-1 && steps[first] < r.Start {
			first++
		}
		return int64(r.BytesPerStep + 0.5), max(0, first-1), true
	}
	from = n - 1
	for from > 0 && vals[from] > vals[from-1] && steps[from] > steps[from-1] {
		from--
	}
	rises := n - 1 - from
	if rises < minSeriesRises {
		return 0, 0, false
	}
	rates := make([]float64, 0, rises)
	for i := from + 1; i < n; i++ {
		rates = append(rates, float64(vals[i]-vals[i-1])/float64(steps[i]-steps[i-1]))
	}
	lo, hi := slices.Min(rates), slices.Max(rates)
	increasing := rises >= 3
	for i := 1; i < len(rates); i++ {
		increasing = increasing && rates[i] > rates[i-1]
	}
	steady := hi <= 2*lo
	if rises == 2 {
		steady = hi-lo <= 0.1*hi
	}
	if !steady && !increasing {
		return 0, 0, false
	}
	sorted := slices.Sorted(slices.Values(rates))
	return int64(sorted[len(sorted)/2] + 0.5), from, true
}

// judgeSeries is the leak evidence of a snapshot series.
func judgeSeries(dumps []seriesDump) LeakEvidence {
	n := len(dumps)
	steps := make([]int64, n)
	totals := make([]int64, n)
	var at []string
	for i, d := range dumps {
		steps[i], totals[i] = d.step, d.total
		at = append(at, fmt.Sprint(d.step))
	}
	last := dumps[n-1]
	name := fmt.Sprintf("the %d snapshots at steps %s", n, strings.Join(at, ", "))
	e := LeakEvidence{Source: last.in.Source, Kind: SourceSnapshot, Verdict: leak.VerdictUnknown, R2: 1,
		Steps: int(steps[n-1] - steps[0] + 1), FirstStep: steps[0], LastStep: steps[n-1], series: name}
	// Every site's bytes at every dump (0 where it held nothing), private
	// pools apart: a CUDA graph's or a MemPool's memory is the pool's.
	var sites []*seriesSite
	byKey := map[string]*seriesSite{}
	noStack := false
	for i, d := range dumps {
		for _, s := range d.sites {
			if s.Pool != ([2]int64{}) {
				continue
			}
			k := siteKey(s)
			noStack = noStack || k == ""
			ss := byKey[k]
			if ss == nil {
				ss = &seriesSite{key: k, site: s, bytes: make([]int64, n)}
				byKey[k] = ss
				sites = append(sites, ss)
			}
			ss.bytes[i] += s.Bytes
			if s.Bytes > ss.site.Bytes {
				ss.site = s
			}
		}
	}
	held := make([]string, n)
	for i, t := range totals {
		held[i] = memtimeline.FormatBytes(t)
	}
	heldText := "live at the dumps: " + strings.Join(held, ", ")
	type grower struct {
		s       *seriesSite
		perStep int64
		from    int
	}
	var growers []grower
	for _, ss := range sites {
		if ps, from, ok := seriesGrowth(steps, ss.bytes); ok {
			growers = append(growers, grower{ss, ps, from})
		}
	}
	slices.SortStableFunc(growers, func(a, b grower) int { return cmp.Compare(b.perStep, a.perStep) })
	totalPS, totalFrom, totalOK := seriesGrowth(steps, totals)
	perDump := func(from int, vals []int64) string {
		var rises []string
		for i := from + 1; i < n; i++ {
			rises = append(rises, "+"+memtimeline.FormatBytes(vals[i]-vals[i-1]))
		}
		return strings.Join(rises, ", ")
	}
	switch {
	case len(growers) > 0:
		top := growers[0]
		e.Verdict = leak.VerdictLeak
		for _, g := range growers {
			e.BytesPerStep += g.perStep
		}
		e.Leaks = len(growers)
		e.GrowthFirst, e.GrowthLast = steps[top.from], steps[n-1]
		e.leakCause.Kind = leak.KindUnknown
		where := "memory with no recorded stack (the history was off when it was allocated, or the snapshots were taken with include_traces=False: the growth is told, the line is not)"
		if top.s.key != "" {
			chain := leak.SnapshotChain(top.s.site.Site, top.s.site.Stack)
			e.Holding = chain
			e.Location = site.LocationOf(chain)
			if e.Location == nil {
				e.Location = site.LocationOf([]string{top.s.site.Site.String()})
			}
			e.StackNote = "from the snapshots' live blocks: each block's stack as it was allocated"
			where = snapshot.FrameName(top.s.site.Site, top.s.site.Stack)
		}
		e.KindEvidence = fmt.Sprintf("%s holds more at every dump from step %d (%s per dump, %s per step)",
			where, steps[top.from], perDump(top.from, top.s.bytes), memtimeline.FormatBytes(top.perStep))
		e.Reason = name + ": " + e.KindEvidence
		if len(growers) > 1 {
			e.Reason += fmt.Sprintf("; %d sites grow, %s per step in all", len(growers), memtimeline.FormatBytes(e.BytesPerStep))
		}
		e.Reason += "; " + heldText
	case totalOK:
		e.Verdict = leak.VerdictLeak
		e.BytesPerStep = totalPS
		e.GrowthFirst, e.GrowthLast = steps[totalFrom], steps[n-1]
		e.leakCause.Kind = leak.KindUnknown
		e.KindEvidence = fmt.Sprintf("live memory grows at every dump from step %d (%s per dump, %s per step), spread over sites none of which grows regularly alone",
			steps[totalFrom], perDump(totalFrom, totals), memtimeline.FormatBytes(totalPS))
		e.Reason = name + ": " + e.KindEvidence + "; " + heldText
	case n-1 < minSeriesRises:
		e.Reason = fmt.Sprintf("%s: two dumps (%s between them) cannot tell a leak from a warm-up; a third dump at the same point of a later step can", name, signedBytes(totals[n-1]-totals[0]))
	default:
		e.Verdict = leak.VerdictClean
		e.Sustained = true
		e.Reason = fmt.Sprintf("%s: no site holds more at every dump; %s", name, heldText)
	}
	if noStack && e.Verdict != leak.VerdictLeak {
		e.Reason += " (some blocks carry no stack: their sites are not told)"
	}
	return e
}
