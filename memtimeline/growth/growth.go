// Package growth is the one statistical model of growth of a step series
// (one value per finished step: a steps log, memory_summary() tables, the
// snippet's LeakWatch window). Every reader that judges growth over steps
// calls Analyze; the snippet's LeakWatch follows the same model and the
// same constants in Python.
//
// The model (GROWTH-SPEC, issue #38):
//
//   - d[i] = y[i] - y[i-1]; the noise sigma is 1.4826 * MAD(d), floored at
//     SigmaFloor (the allocator's granularity), so a staircase's jumps are
//     outliers of d and do not inflate it; or 1.4826 * MAD of the changes
//     over two steps when lower (a staircase of period 2: half the d are
//     its jumps). LeakWatch's noise_sigma is the same.
//   - Jumps: d[i] > JumpK*sigma that do not fall back (the level over the
//     next FallBack steps stays at least half the jump above the level
//     before it). A staircase is >= MinJumps jumps at regular intervals
//     (each within max(1, p/5) of their median p) that end within one
//     period of the end and keep their height (the level at the end keeps
//     at least half of their sum).
//   - Bumps: a jump paired with a later drop of its size (a buffer held
//     for a while, then freed) is taken out before the rest reads the
//     series.
//   - Trend: the series without the changes that stand out from its
//     typical (median) step by SmoothK*sigma is split at the change
//     point s (a flat part at its median, then a Theil-Sen line, least
//     absolute residual); growth is significant when the Mann-Kendall Z of
//     [s, end] is >= ZCrit (one-sided) over >= MinSteps points, in the
//     series, in the series without its jumps, and without its largest
//     rise.
//   - Plateau, measured: the longest tail with no jump, Mann-Kendall not
//     significant either way and |slope| * L <= PlateauC * sigma (the
//     tail's own noise when lower: a fill before it inflates the series'
//     MAD, and the flat runs of a staircase must not pass), of length
//     L >= max(PlateauMin, 2 x the longest interval between jumps before
//     it), after a rise of more than PlateauC * sigma.
//
// Verdicts: Growth (a leak: significant trend or staircase, no plateau at
// the end), Plateau (grew, then a measured plateau: a cache or queue that
// filled), Flat (the whole series is flat by the plateau test and has at
// least MinFlat points), Inconclusive (anything else; it never overrules
// another source). Size never decides the verdict.
package growth

import (
	"fmt"
	"math"
	"slices"

	"github.com/torchmem/torchmem/memtimeline"
)

// Verdict of one series.
type Verdict string

// The verdicts.
const (
	Growth       Verdict = "growth"
	Plateau      Verdict = "plateau"
	Flat         Verdict = "flat"
	Inconclusive Verdict = "inconclusive"
)

// Params are the model's constants; Default gives the calibrated ones
// (corpus_test.go measures them).
type Params struct {
	// SigmaFloor is the smallest noise, in bytes.
	SigmaFloor float64
	// ZCrit is the one-sided Mann-Kendall score of significant growth.
	ZCrit float64
	// JumpK: a jump is a rise above JumpK * sigma. The snippet's
	// LeakWatch uses the same value (JUMP_K): measured on the corpus,
	// 4 / 5 / 6 give recall 99.57 / 99.57 / 99.54% and false alarms
	// 0.40 / 0.34 / 0.32% here, and LeakWatch, which alarms at a
	// staircase's third jump, 99.1 / 98.6 / 97.9% of the staircases.
	JumpK float64
	// SmoothK: changes above SmoothK * sigma are taken out (down to the
	// typical step around them) before the trend test, so that one-time
	// jumps do not make a trend.
	SmoothK float64
	// FallBack is how many steps after a jump its level is taken over.
	FallBack int
	// MinSteps is the fewest points of a significant trend; MinJumps the
	// fewest jumps of a staircase.
	MinSteps int
	MinJumps int
	// PlateauMin is the shortest plateau; PlateauC bounds its drift
	// (|slope| * L) in sigmas.
	PlateauMin int
	PlateauC   float64
	// MinFlat is the fewest points of a Flat verdict.
	MinFlat int
	// ShortTail: growth that stopped, then stayed flat for ShortTail
	// steps or more (too few for a plateau) is inconclusive, not growth.
	ShortTail int
	// MaxPoints bounds the work: a longer series is reduced to MaxPoints
	// block medians first (Theil-Sen and Mann-Kendall are quadratic).
	MaxPoints int
}

// Default returns the calibrated constants.
func Default() Params {
	return Params{SigmaFloor: 64, ZCrit: 3.09, JumpK: 4, SmoothK: 6, FallBack: 3, MinSteps: 9, MinJumps: 3,
		PlateauMin: 10, PlateauC: 3, MinFlat: 5, ShortTail: 8, MaxPoints: 400}
}

// Result is the model's reading of one series.
type Result struct {
	Verdict Verdict `json:"verdict"`
	// Points is how many values the model read; Sigma the step noise.
	Points int     `json:"points"`
	Sigma  float64 `json:"sigma_bytes"`
	// Growth: the step it starts at (the change point, or the first jump
	// of a staircase) and the last step it covers; the growth per step
	// (Theil-Sen slope, or jump / period), the Mann-Kendall score of the
	// trend and the steps it rests on.
	Start        int64   `json:"start_step"`
	End          int64   `json:"end_step"`
	BytesPerStep float64 `json:"bytes_per_step"`
	Z            float64 `json:"z"`
	// Staircase: jumps every Period steps of Jump bytes (their mean);
	// Jumps counts them.
	Staircase bool    `json:"staircase,omitempty"`
	Period    int64   `json:"period_steps,omitempty"`
	Jump      float64 `json:"jump_bytes,omitempty"`
	Jumps     int     `json:"jumps,omitempty"`
	// Accelerating: the second half grows clearly faster than the first.
	Accelerating bool `json:"accelerating,omitempty"`
	// Plateau: the fill rose FillBytes from step Start to step End, then
	// stayed flat for PlateauSteps steps from PlateauFrom.
	FillBytes    float64 `json:"fill_bytes,omitempty"`
	PlateauFrom  int64   `json:"plateau_from_step,omitempty"`
	PlateauSteps int     `json:"plateau_steps,omitempty"`
	// Why says, for Inconclusive, what is missing.
	Why string `json:"why,omitempty"`
}

// Analyze reads the series y (one value per step, steps[i] its step
// number, increasing) with p's constants. Its phases: the noise and the
// jumps (series), a measured flat or plateau (judgeFlat, judgePlateau),
// then a staircase or a trend (judgeGrowth), else what is missing (why).
func Analyze(steps []int64, y []float64, p Params) Result {
	if len(steps) != len(y) {
		panic("growth.Analyze: steps and values differ in length")
	}
	steps, y = reduce(steps, y, p.MaxPoints)
	n := len(y)
	r := Result{Verdict: Inconclusive, Points: n, Start: -1, End: -1}
	if n < 3 {
		r.Why = fmt.Sprintf("%d values: too few to tell", n)
		return r
	}
	a := newSeries(steps, y, p)
	r.Sigma = a.sigma
	// The longest flat tail: a plateau when something rose before it.
	e := flatTail(a.x, a.y, a.sigma, a.jumps, a.drops, p)
	if a.judgeFlat(&r, e) {
		return r
	}
	grew, L, done := a.judgePlateau(&r, e)
	if done {
		return r
	}
	if a.judgeGrowth(&r, grew, L) {
		return r
	}
	r.Why = a.why(e)
	return r
}

// series is one step series as Analyze reads it: x the steps from the
// first, y the values (without bumps that fell back), d the changes,
// sigma the noise, and the jumps and drops above it.
type series struct {
	steps        []int64
	x, y, d      []float64
	sigma        float64
	jumps, drops []int
	n            int
	p            Params
}

func newSeries(steps []int64, y []float64, p Params) *series {
	n := len(y)
	x := make([]float64, n)
	for i, s := range steps {
		x[i] = float64(s - steps[0])
	}
	d := make([]float64, n-1)
	for i := 1; i < n; i++ {
		d[i-1] = y[i] - y[i-1]
	}
	sigma := max(1.4826*mad(d), p.SigmaFloor)
	if n > 4 {
		// A staircase of period 2 rises every other step: its jumps are
		// half the step-to-step changes, not outliers of them; the
		// changes over two steps keep only the noise.
		d2 := make([]float64, n-2)
		for i := 2; i < n; i++ {
			d2[i-2] = y[i] - y[i-2]
		}
		sigma = max(min(sigma, 1.4826*mad(d2)), p.SigmaFloor)
	}
	jumps, drops := findJumps(y, d, sigma, p)
	if yb, ok := dropBumps(y, d, jumps, drops); ok {
		// A block that rose and fell back by as much (a buffer held for
		// a while, then freed) is no part of the growth: the model reads
		// the series without it.
		y = yb
		for i := 1; i < n; i++ {
			d[i-1] = y[i] - y[i-1]
		}
		jumps, drops = findJumps(y, d, sigma, p)
	}
	return &series{steps: steps, x: x, y: y, d: d, sigma: sigma, jumps: jumps, drops: drops, n: n, p: p}
}

// judgeFlat says Flat when the whole series is flat (e == 0: its flat
// tail is all of it), or rose and fell back to flat.
func (a *series) judgeFlat(r *Result, e int) bool {
	n, p := a.n, a.p
	if e == 0 && n >= p.MinFlat || e > 0 && n >= p.MinFlat && wholeFlat(a.x, a.y, a.sigma, p) {
		// (the second: up and back down, a bump that fell back)
		r.Verdict = Flat
		r.Start, r.End = a.steps[0], a.steps[n-1]
		r.BytesPerStep, _ = theilSen(a.x, a.y)
		return true
	}
	return false
}

// judgePlateau says Plateau when the series rose and then stayed flat
// from e on for long enough; grew says it rose before e by more than the
// noise, visibly at its own rate, and L is the tail's length.
func (a *series) judgePlateau(r *Result, e int) (grew bool, L int, done bool) {
	steps, x, y, n, p, sigma := a.steps, a.x, a.y, a.n, a.p, a.sigma
	L = n - e
	if e >= n {
		return false, L, false
	}
	need := p.PlateauMin
	prev := -1
	for _, j := range a.jumps {
		if j > e {
			break
		}
		if prev >= 0 {
			need = max(need, 2*(j-prev))
		}
		prev = j
	}
	tail := median(y[e:])
	head := median(y[:min(3, e)])
	fill := tail - head
	grew = fill > p.PlateauC*sigma
	// The tail is evidence that the growth stopped only if growth at
	// the rate it had would have shown in it (a small leak under
	// heavy churn is flat within the noise over a few dozen steps).
	// Its rate: half the fill over the steps from where it first got
	// half way (running median of 3, against noise) to the plateau.
	mid := e
	for i := 0; i < e; i++ {
		if median(y[max(0, i-1):min(n, i+2)]) > head+fill/2 {
			mid = i
			break
		}
	}
	rate := fill / 2 / max(1, x[e]-x[mid])
	visible := rate*(x[n-1]-x[e]) > p.PlateauC*sigma
	grew = grew && visible
	if L >= need && grew {
		r.Verdict = Plateau
		r.Start, r.End = steps[0], steps[e]
		if len(a.jumps) > 0 && a.jumps[0] <= e {
			r.Start = steps[a.jumps[0]]
		}
		r.FillBytes, r.PlateauFrom, r.PlateauSteps = fill, steps[e], L
		return grew, L, true
	}
	return grew, L, false
}

// judgeGrowth says Growth for a staircase reaching the end, or a trend in
// the series without its jumps from the change point on; it says why not
// when the series grew and then stopped for too short a tail.
func (a *series) judgeGrowth(r *Result, grew bool, L int) bool {
	steps, x, y, d, n, p, sigma := a.steps, a.x, a.y, a.d, a.n, a.p, a.sigma
	// The trend reads z, the series without the changes that stand out
	// from its typical step; a staircase's jumps stand out from the steps
	// between them (from 0 when it rises every step).
	z, excess := smooth(y, d, p.SmoothK*sigma, p.FallBack, median(d))
	zs, stand := smooth(y, d, p.SmoothK*sigma, p.FallBack, 0)
	st, stair := staircase(steps, y, d, stand, sigma, a.jumps, a.drops, n, p)
	s := changePoint(x, z, p.MinSteps)
	trend := false
	var zslope float64
	if n-s >= p.MinSteps {
		// Significant in the series (the data) and in the series without
		// its jumps (not the work of one-time jumps alone).
		_, zy := mannKendall(y[s:], 0)
		_, r.Z = mannKendall(z[s:], 0)
		zslope, _ = theilSen(x[s:], z[s:])
		trend = r.Z >= p.ZCrit && zy >= p.ZCrit && zslope > 0
		if trend {
			// Not the work of one rise alone: without the largest, the
			// trend stays significant (one-time jumps below the jump
			// threshold on a noisy series).
			trend = withoutLargest(z[s:], 1) >= p.ZCrit
		}
	}
	switch {
	case stair:
		a.stairResult(r, st, zs, s)
		return true
	case trend && grew && L >= p.ShortTail:
		// It grew, then stopped: a tail too short for a plateau.
		r.Why = fmt.Sprintf("it grew, then stayed flat for the last %d steps: too short a tail to call it a plateau (need %d), too long to call it growing", L, p.PlateauMin)
		return true
	case trend:
		a.trendResult(r, s, zslope, excess)
		return true
	}
	return false
}

// stairResult is a staircase's figures: its period and jump, and a slow
// growth under the stairs (zs, the series without them, still grows
// significantly from s on).
func (a *series) stairResult(r *Result, st stairs, zs []float64, s int) {
	steps, x, n, p := a.steps, a.x, a.n, a.p
	r.Verdict = Growth
	// A jump at every value read is growth at every record (a log
	// written every few steps), told per step, not as stairs.
	r.Staircase, r.Period, r.Jump, r.Jumps = true, st.period, st.jump, st.count
	r.Start, r.End = steps[st.first], steps[n-1]
	r.BytesPerStep = st.jump / float64(st.period)
	if st.everyPoint {
		r.Staircase, r.Period, r.Jump, r.Jumps = false, 0, 0, 0
	}
	r.Accelerating = st.accelerating
	r.Z = math.Inf(1)
	if n-s >= p.MinSteps {
		if _, zz := mannKendall(zs[s:], 0); zz >= p.ZCrit {
			if b, _ := theilSen(x[s:], zs[s:]); b > 0 {
				r.Z = zz
				r.BytesPerStep += b
				r.Start = steps[min(s, st.first)]
			}
		}
	}
}

// trendResult is a trend's figures from the change point s on.
func (a *series) trendResult(r *Result, s int, zslope float64, excess []float64) {
	steps, x, y, n, p, sigma := a.steps, a.x, a.y, a.n, a.p, a.sigma
	r.Verdict = Growth
	r.Start, r.End = steps[s], steps[n-1]
	if s > 0 {
		// z[s] is the line's base, at the flat part's level: the first
		// step that grew is the next.
		r.Start = steps[s+1]
	}
	r.BytesPerStep = zslope
	// Jumps that recur inside the growth are part of it (rises of
	// uneven size, the larger ones above the noise); one or two are
	// one-time.
	var in []int
	for _, j := range a.jumps {
		if j > s && excess[j-1] > p.JumpK*sigma {
			in = append(in, j)
		}
	}
	if span := x[n-1] - x[s]; len(in) >= p.MinJumps && span > 0 && spread(in, s, n) {
		// Jumps that recur over the whole growth are part of its
		// slope: the robust line through the series itself.
		r.BytesPerStep, _ = theilSen(x[s:], y[s:])
	}
	r.Accelerating = accelerating(x[s:], y[s:], sigma)
}

// why says what an inconclusive series lacks.
func (a *series) why(e int) string {
	n, p, jumps := a.n, a.p, a.jumps
	switch {
	case n < p.MinSteps && len(jumps) < p.MinJumps:
		return fmt.Sprintf("%d values: too few to tell growth (a trend needs %d, a staircase %d rises)", n, p.MinSteps, p.MinJumps)
	case len(jumps) >= p.MinJumps:
		return fmt.Sprintf("%d rises at irregular steps, not leveling off yet: a cache filling with new keys, or a leak", len(jumps))
	case len(jumps) > 0 && e < n:
		return fmt.Sprintf("%d one-time rise(s), then flat for %d steps: too short a tail to call it a plateau (need %d)", len(jumps), n-e, p.PlateauMin)
	case len(jumps) > 0:
		return fmt.Sprintf("%d one-time rise(s); no steady growth", len(jumps))
	}
	return "no significant trend, and the series moves more than its noise"
}

// reduce bounds the series to at most maxPoints block medians.
func reduce(steps []int64, y []float64, maxPoints int) ([]int64, []float64) {
	n := len(y)
	if maxPoints <= 0 || n <= maxPoints {
		return steps, y
	}
	b := (n + maxPoints - 1) / maxPoints
	var s2 []int64
	var y2 []float64
	for i := 0; i < n; i += b {
		j := min(n, i+b)
		s2 = append(s2, steps[j-1])
		y2 = append(y2, median(y[i:j]))
	}
	return s2, y2
}

// findJumps returns the indices i (of y) where the series jumps up by
// more than JumpK*sigma and stays up, and those where it drops as much
// and stays down.
// A rise every step by the same amount is thus a staircase of period 1
// when the series has no other noise.
func findJumps(y, d []float64, sigma float64, p Params) (jumps, drops []int) {
	n := len(y)
	for i := 1; i < n; i++ {
		di := d[i-1]
		if math.Abs(di) <= p.JumpK*sigma {
			continue
		}
		before := median(y[max(0, i-p.FallBack):i])
		after := median(y[i:min(n, i+p.FallBack)])
		if di > 0 && after-before >= di/2 {
			jumps = append(jumps, i)
		}
		if di < 0 && before-after >= -di/2 {
			drops = append(drops, i)
		}
	}
	return jumps, drops
}

// dropBumps takes out of y every block that rose by a jump and fell back
// later by a drop of the same size (within a quarter): each drop is
// paired with the latest unpaired jump of its size before it, and the
// values between them are lowered by the jump's excess over the typical
// step (smaller rises inside the block keep their height). ok is false
// when there is none.
func dropBumps(y, d []float64, jumps, drops []int) ([]float64, bool) {
	if len(jumps) == 0 || len(drops) == 0 {
		return y, false
	}
	m := median(d)
	used := make([]bool, len(jumps))
	var out []float64
	for _, k := range drops {
		// the latest unpaired jump before the drop of its size
		down := -(d[k-1] - m)
		a := -1
		for i, j := range jumps {
			if up := d[j-1] - m; j < k && !used[i] && math.Abs(up-down) <= up/4 {
				a = i
			}
		}
		if a < 0 {
			continue
		}
		j := jumps[a]
		up := d[j-1] - m
		used[a] = true
		if out == nil {
			out = slices.Clone(y)
		}
		for i := j; i < k; i++ {
			out[i] -= up
		}
	}
	if out == nil {
		return y, false
	}
	return out, true
}

// spread: the jumps recur over all of [s, n): none of the gaps before the
// first, between them or after the last is over twice their median gap
// (plus one step).
func spread(in []int, s, n int) bool {
	gaps := make([]float64, 0, len(in)-1)
	for i := 1; i < len(in); i++ {
		gaps = append(gaps, float64(in[i]-in[i-1]))
	}
	lim := 2*median(gaps) + 1
	if float64(in[0]-s) > lim || float64(n-1-in[len(in)-1]) > lim {
		return false
	}
	return slices.Max(gaps) <= lim
}

// flatTail returns the smallest e such that y[e:] is flat: no jump or drop
// after e, the Mann-Kendall score within ZCrit either way and the drift
// |slope| * L within PlateauC * sigma. n when not even the last two points
// are.
func flatTail(x, y []float64, sigma float64, jumps, drops []int, p Params) int {
	n := len(y)
	stop := 0 // the tail may not hold a jump or a drop
	for _, j := range jumps {
		stop = max(stop, j)
	}
	for _, j := range drops {
		stop = max(stop, j)
	}
	best := n
	// Mann-Kendall S of y[e:], grown one point at a time from the end.
	s := 0
	for e := n - 1; e >= stop; e-- {
		for j := e + 1; j < n; j++ {
			switch dd := y[j] - y[e]; {
			case dd > 0:
				s++
			case dd < 0:
				s--
			}
		}
		L := n - e
		if L < 3 {
			continue
		}
		z := mkZ(s, L, tieGroups(y[e:], 0))
		if math.Abs(z) >= p.ZCrit {
			continue
		}
		slope := lagSlope(x[e:], y[e:])
		span := x[n-1] - x[e]
		// Flat within the tail's own noise when that is below the
		// series' (a fill before it inflates the series' MAD).
		if math.Abs(slope)*span <= p.PlateauC*min(sigma, tailNoise(y[e:], p.SigmaFloor)) {
			best = e
		}
	}
	return best
}

// tailNoise is 1.4826 * MAD of v's step-to-step changes, at least floor.
func tailNoise(v []float64, floor float64) float64 {
	d := make([]float64, len(v)-1)
	for i := range d {
		d[i] = v[i+1] - v[i]
	}
	return max(1.4826*mad(d), floor)
}

// withoutLargest is the Mann-Kendall score of v with its k largest rises
// taken out (each replaced by the median rise).
func withoutLargest(v []float64, k int) float64 {
	n := len(v)
	if n < 3 {
		return 0
	}
	d := make([]float64, n-1)
	for i := range d {
		d[i] = v[i+1] - v[i]
	}
	m := median(d)
	idx := make([]int, len(d))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case d[a] > d[b]:
			return -1
		case d[a] < d[b]:
			return 1
		}
		return 0
	})
	for _, i := range idx[:min(k, len(idx))] {
		if d[i] > m {
			d[i] = m
		}
	}
	w := make([]float64, n)
	w[0] = v[0]
	for i := range d {
		w[i+1] = w[i] + d[i]
	}
	_, z := mannKendall(w, 0)
	return z
}

// wholeFlat: no trend either way over the whole series, the drift of its
// robust line within PlateauC sigmas, and it ends where it began.
func wholeFlat(x, y []float64, sigma float64, p Params) bool {
	n := len(y)
	_, z := mannKendall(y, 0)
	slope, _ := theilSen(x, y)
	k := min(3, n)
	return math.Abs(z) < p.ZCrit && math.Abs(slope)*(x[n-1]-x[0]) <= p.PlateauC*sigma &&
		math.Abs(median(y[n-k:])-median(y[:k])) <= p.PlateauC*sigma
}

// stairs is a staircase found at the end of a series.
type stairs struct {
	first, count int
	period       int64
	jump         float64
	accelerating bool
	// everyPoint: a jump at every value read (a log that records every
	// few steps): a rise at each record, not stairs between flat runs.
	everyPoint bool
}

// staircase finds >= MinJumps regular jumps ending within one period of
// the end of the series that keep their height.
func staircase(steps []int64, y, d, excess []float64, sigma float64, jumps, drops []int, n int, p Params) (stairs, bool) {
	// A staircase's jumps stand out from the steps between them (a leak
	// of uneven steps, the larger ones above the noise, is a trend).
	var stand []int
	for _, j := range jumps {
		if excess[j-1] > p.JumpK*sigma {
			stand = append(stand, j)
		}
	}
	jumps = stand
	if len(jumps) < p.MinJumps {
		return stairs{}, false
	}
	// The jumps alike in size (within 3x: a fill before a leak, or a
	// sawtooth under it, is not one of its steps), anchored on one of the
	// last three jumps; then from the last back while the intervals stay
	// regular. The anchor giving the most jumps wins.
	var at []int
	var ivs []int
	for a := len(jumps) - 1; a >= max(0, len(jumps)-3); a-- {
		ref := d[jumps[a]-1]
		var alike []int
		for _, j := range jumps[:a+1] {
			if v := d[j-1]; v <= 3*ref && 3*v >= ref {
				alike = append(alike, j)
			}
		}
		k := len(alike) - 1
		var iv []int
		for k > 0 {
			cand := append(slices.Clone(iv), alike[k]-alike[k-1])
			pm := median(intsToFloats(cand))
			tol := max(1, pm/5)
			ok := true
			for _, v := range cand {
				ok = ok && math.Abs(float64(v)-pm) <= tol
			}
			if !ok {
				break
			}
			iv = cand
			k--
		}
		if len(iv)+1 > len(at) {
			at, ivs = alike[k:], iv
		}
	}
	count := len(at)
	if count < p.MinJumps {
		return stairs{}, false
	}
	pm := median(intsToFloats(ivs))
	last := at[len(at)-1]
	if float64(n-1-last) > pm+max(1, pm/5) {
		return stairs{}, false
	}
	// No fall-back: the series does not drop, from the first jump on, by
	// half a jump or more.
	jumpMed := median(func() []float64 {
		v := make([]float64, len(at))
		for i, j := range at {
			v[i] = d[j-1]
		}
		return v
	}())
	for _, j := range drops {
		if j > at[0] && -d[j-1] >= jumpMed/2 {
			return stairs{}, false
		}
	}
	// Nothing else rises like them in between: other jumps of a quarter
	// of theirs or more make it rises at random (a cache filling with new
	// keys), not a staircase.
	for _, j := range jumps {
		if j > at[0] && !slices.Contains(at, j) && 4*d[j-1] >= jumpMed {
			return stairs{}, false
		}
	}
	var sum float64
	rises := make([]int64, len(at))
	for i, j := range at {
		sum += d[j-1]
		rises[i] = int64(d[j-1])
	}
	// The steps keep their height: the level at the end holds at least
	// half of what the jumps added.
	before := median(y[max(0, at[0]-p.FallBack):at[0]])
	endLevel := median(y[max(last, n-max(1, int(pm))):])
	if endLevel-before < sum/2 {
		return stairs{}, false
	}
	period := max((steps[last]-steps[at[0]])/int64(len(at)-1), 1)
	return stairs{first: at[0], count: count, period: period, jump: sum / float64(count),
		accelerating: memtimeline.IncreasingRises(rises), everyPoint: pm == 1}, true
}

func intsToFloats(v []int) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// smooth is y with the excess of every change beyond ref +- thr,
// taken out: each such change is replaced by the typical step around it
// (the median of the other changes within FallBack steps either side, ref
// when there are none). What is left is the series' slow part, which
// one-time jumps and spikes do not move. excess[i] is what was taken out
// at change i (0 for the others).
func smooth(y, d []float64, thr float64, w int, ref float64) (z, excess []float64) {
	big := func(v float64) bool { return math.Abs(v-ref) > thr }
	z = slices.Clone(y)
	excess = make([]float64, len(d))
	var off float64
	for i := 1; i < len(y); i++ {
		if v := d[i-1]; big(v) {
			var near []float64
			for j := max(0, i-1-w); j <= min(len(d)-1, i-1+w); j++ {
				if !big(d[j]) {
					near = append(near, d[j])
				}
			}
			typical := ref
			if len(near) > 0 {
				typical = median(near)
			}
			excess[i-1] = v - typical
			off += excess[i-1]
		}
		z[i] = y[i] - off
	}
	return z, excess
}

// changePoint returns the s that best splits z into a flat part z[:s] (at
// its median) and a line z[s:] (robust slope), by least total absolute
// residual, with at least minSteps points after s. 0: one line throughout.
func changePoint(x, z []float64, minSteps int) int {
	n := len(z)
	best, bestCost := 0, math.Inf(1)
	for s := 0; s <= n-minSteps; s++ {
		var cost float64
		if s > 0 {
			m := median(z[:s])
			for _, v := range z[:s] {
				cost += math.Abs(v - m)
			}
		}
		xs, zs := x[s:], z[s:]
		b := lagSlope(xs, zs)
		res := make([]float64, len(zs))
		for i := range zs {
			res[i] = zs[i] - b*xs[i]
		}
		a := median(res)
		for _, v := range res {
			cost += math.Abs(v - a)
		}
		if math.IsInf(bestCost, 1) || cost < bestCost-1e-9*math.Abs(bestCost) {
			best, bestCost = s, cost
		}
	}
	return best
}

// accelerating: the second half's slope is above 1.5 times the first's
// and the difference over the half is above the noise.
func accelerating(x, y []float64, sigma float64) bool {
	n := len(y)
	if n < 8 {
		return false
	}
	h := n / 2
	a, _ := theilSen(x[:h], y[:h])
	b, _ := theilSen(x[h:], y[h:])
	return a > 0 && b > 1.5*a && (b-a)*(x[n-1]-x[h]) > 3*sigma
}

// Describe says the result in a phrase about "what" (e.g. "requested
// bytes"): "grows 4.00 MB every step from step 12 (steps 12..44)".
func (r Result) Describe(what string) string {
	fb := func(v float64) string { return memtimeline.FormatBytes(int64(math.Round(v))) }
	switch r.Verdict {
	case Growth:
		var s string
		if r.Staircase && r.Period > 1 {
			s = fmt.Sprintf("%s grows in jumps of %s every %d steps (%d jumps from step %d): %s per step", what, fb(r.Jump), r.Period, r.Jumps, r.Start, fb(r.BytesPerStep))
		} else {
			s = fmt.Sprintf("%s grows %s per step from step %d to the end of the log (step %d)", what, fb(r.BytesPerStep), r.Start, r.End)
		}
		if r.Accelerating {
			s += ", faster over time (accelerating)"
		}
		return s
	case Plateau:
		over := fmt.Sprintf("over steps %d..%d", r.Start, r.End)
		if r.Start == r.End {
			over = fmt.Sprintf("at step %d", r.Start)
		}
		return fmt.Sprintf("%s rose %s %s, then stayed flat for %d steps to the end of the log: bounded (a cache or queue that filled up), not a leak", what, fb(r.FillBytes), over, r.PlateauSteps)
	case Flat:
		if r.Sigma <= Default().SigmaFloor {
			return fmt.Sprintf("%s stays flat over steps %d..%d", what, r.Start, r.End)
		}
		return fmt.Sprintf("%s stays flat over steps %d..%d (within its step noise of %s)", what, r.Start, r.End, fb(r.Sigma))
	}
	return fmt.Sprintf("%s: inconclusive (%s)", what, r.Why)
}
