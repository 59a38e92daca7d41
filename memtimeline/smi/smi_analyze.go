package smi

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/growth"
)

// Options tunes Analyze. DefaultOptions gives the values the
// command uses; zero fields are NOT replaced by defaults.
type Options struct {
	// Threshold is the fraction of memory.total above which memory use is
	// an alarm (the time spent there is reported).
	Threshold float64

	// A growth run is a leak when all of these hold: it lasts at least
	// MinGrowthDuration over at least MinGrowthSamples samples, rises to a
	// new high at least MinGrowthRises times, grows by at least
	// MinGrowthBytes, no single rise is more than MaxRiseFraction of the
	// growth (steady growth, not a process that loads and then sits on a
	// plateau), and a straight line fits it with R^2 >= MinGrowthR2; and
	// memory does not then hold flat (no new high, no drop) for at least
	// as long as it grew (a load or a cache filled once). Regularity is
	// the growth model's (memtimeline/growth, one sample a step): a
	// window it does not read as growth is no leak whatever its fit, and
	// one that fails the jump-size or R^2 test but that the model reads
	// as growth (a significant Mann-Kendall trend from its change point,
	// or a staircase) with the duration, samples and new highs above is
	// a leak, at the model's rate. Size never decides it (MinGrowthBytes
	// is 0; smi.leak's threshold sets the severity).
	MinGrowthDuration time.Duration
	MinGrowthSamples  int
	MinGrowthRises    int
	MinGrowthBytes    int64
	MaxRiseFraction   float64
	MinGrowthR2       float64

	// A run survives a dip below its high of up to JitterBytes or
	// JitterFraction of its growth so far, whichever is larger; a deeper
	// drop (a process ending, a cache being emptied) ends it.
	JitterBytes    int64
	JitterFraction float64

	// A drop to at most NearZeroFraction of memory.total (of the peak when
	// the total is not logged) means the process ended; a growth run that
	// ends with a drop to a level above that gave its memory back and is
	// not a leak.
	NearZeroFraction float64

	// Starvation: memory.used at least StarveMemFraction of the GPU's peak
	// in the log (and at least StarveMinBytes) while utilization.gpu is at
	// most StarveUtilPct, for at least MinStarveDuration. A job that holds
	// its memory but keeps the GPU idle is usually waiting for input.
	StarveMemFraction float64
	StarveMinBytes    int64
	StarveUtilPct     float64
	MinStarveDuration time.Duration

	// A process of a compute-apps log still holding memory, unchanged, at
	// the end of the logs is a zombie when it did so for at least
	// ZombieMinDuration after another process on its GPU exited (or for
	// MinStarveDuration with the GPU idle).
	ZombieMinDuration time.Duration
}

// DefaultOptions returns the defaults of `torchmem smi`.
func DefaultOptions() Options {
	return Options{
		Threshold:         0.9,
		MinGrowthDuration: 10 * time.Second,
		MinGrowthSamples:  10,
		MinGrowthRises:    8,
		// A leak is regular growth at any size (smi.leak's threshold sets
		// its severity): no minimum growth.
		MinGrowthBytes:    0,
		MaxRiseFraction:   0.25,
		MinGrowthR2:       0.9,
		JitterBytes:       16 << 20,
		JitterFraction:    0.05,
		NearZeroFraction:  0.02,
		StarveMemFraction: 0.5,
		StarveMinBytes:    1 << 30,
		StarveUtilPct:     10,
		MinStarveDuration: 10 * time.Second,
		ZombieMinDuration: 3 * time.Second,
	}
}

// Analysis is what Analyze finds, per GPU in log order.
type Analysis struct {
	Options Options
	GPUs    []GPUReport
}

// Leaks returns every leak finding over all GPUs.
func (a Analysis) Leaks() []GrowthRun {
	var out []GrowthRun
	for _, g := range a.GPUs {
		out = append(out, g.Leaks...)
	}
	return out
}

// GPUReport summarizes one GPU of an nvidia-smi log.
type GPUReport struct {
	Key   string
	Index int
	Name  string
	BusID string
	UUID  string

	Samples int
	Start   time.Time
	End     time.Time
	// Interval is the median time between samples (the -lms setting).
	Interval time.Duration

	// TotalBytes is memory.total (the largest seen); -1 when not logged.
	TotalBytes     int64
	PeakUsedBytes  int64
	PeakTime       time.Time
	FinalUsedBytes int64
	// Utilization of the GPU's cores; -1 when not logged.
	MeanUtilGPUPct float64
	MaxUtilGPUPct  float64

	// Runs are the growth runs that grew by at least MinGrowthBytes, in
	// time order, each with its verdict.
	Runs []GrowthRun
	// Leaks are the stretches of steady growth, longest first. One may be
	// a part of a run (the slow growth after a fast start-up ramp).
	Leaks []GrowthRun
	// StillGrowing is a growth run that is not a leak but was still
	// rising when the process ended or the log did (its last rise came
	// within StillGrowingFactor of its recent rises' spacing before the
	// end): too short to call a leak, too recent to call a plateau. Nil
	// when every run ended in a plateau (a process loading its model and
	// data, then training in steady state) or was judged a leak.
	StillGrowing *GrowthRun
	// Starvation are periods of high memory and low utilization.
	Starvation []Period
	// AboveThreshold is the time memory.used spent above Threshold of
	// memory.total.
	AboveThreshold ThresholdAlarm
}

// GrowthRun is a stretch of one GPU's memory.used that keeps reaching new
// highs without a real drop.
type GrowthRun struct {
	Start time.Time
	End   time.Time
	// StartSample and EndSample index GPU.Samples (inclusive).
	StartSample int
	EndSample   int
	Duration    time.Duration
	Samples     int
	// Rises counts the samples that set a new high.
	Rises            int
	StartBytes       int64
	EndBytes         int64
	GrowthBytes      int64
	LargestRiseBytes int64
	// LongestStall is the longest time between two new highs.
	LongestStall time.Duration
	// SlopeBytesPerSec and R2 come from a least-squares line through the
	// run's samples.
	SlopeBytesPerSec float64
	R2               float64
	Leak             bool
	// Reason says why the run is, or is not, a leak.
	Reason string
	// DroppedTo is where memory.used fell when the run ended, -1 when the
	// log ended first; DropTime is when it got there.
	DroppedTo int64
	DropTime  time.Time
	// Released: the drop gave back at least half the growth but memory
	// stayed above near zero, so the process lived on and freed it.
	Released bool
}

// Period is a stretch of consecutive samples; End is the last sample's
// time plus the sampling interval, so Duration = End - Start.
type Period struct {
	Start          time.Time
	End            time.Time
	Duration       time.Duration
	Samples        int
	MeanUsedBytes  int64
	MaxUsedBytes   int64
	MeanUtilGPUPct float64
}

// ThresholdAlarm is the time spent above the alarm threshold.
type ThresholdAlarm struct {
	Threshold float64
	// ThresholdBytes is Threshold * memory.total; -1 when memory.total
	// was not logged (then nothing is measured).
	ThresholdBytes int64
	Duration       time.Duration
	Samples        int
	Periods        []Period
}

// Analyze measures every GPU of log: memory and utilization, growth
// runs judged as leaks, starvation periods, time above the threshold.
func Analyze(log *Log, opts Options) Analysis {
	a := Analysis{Options: opts}
	if log == nil {
		return a
	}
	for _, g := range log.GPUs {
		a.GPUs = append(a.GPUs, analyzeSMIGPU(g, opts))
	}
	return a
}

func analyzeSMIGPU(g *GPU, opts Options) GPUReport {
	r := GPUReport{
		Key: g.Key, Index: g.Index, Name: g.Name, BusID: g.BusID, UUID: g.UUID,
		Samples: len(g.Samples), TotalBytes: -1, PeakUsedBytes: -1, FinalUsedBytes: -1,
		MeanUtilGPUPct: -1, MaxUtilGPUPct: -1,
	}
	s := g.Samples
	if len(s) == 0 {
		return r
	}
	r.Start, r.End = s[0].Time, s[len(s)-1].Time
	r.Interval = medianInterval(s)
	var utilSum float64
	var utilN int
	for _, x := range s {
		r.TotalBytes = max(r.TotalBytes, x.TotalBytes)
		if x.UsedBytes > r.PeakUsedBytes {
			r.PeakUsedBytes, r.PeakTime = x.UsedBytes, x.Time
		}
		if x.UsedBytes >= 0 {
			r.FinalUsedBytes = x.UsedBytes
		}
		if x.UtilGPUPct >= 0 {
			utilSum += x.UtilGPUPct
			utilN++
			r.MaxUtilGPUPct = max(r.MaxUtilGPUPct, x.UtilGPUPct)
		}
	}
	if utilN > 0 {
		r.MeanUtilGPUPct = utilSum / float64(utilN)
	}
	nearZeroRef := r.TotalBytes
	if nearZeroRef <= 0 {
		nearZeroRef = r.PeakUsedBytes
	}
	nearZero := max(opts.JitterBytes, int64(opts.NearZeroFraction*float64(nearZeroRef)))
	r.Runs, r.Leaks = findGrowthRuns(s, opts, nearZero)
	r.StillGrowing = stillGrowing(s, r.Runs)
	r.Starvation = starvationPeriods(s, r, opts)
	r.AboveThreshold = thresholdAlarm(s, r, opts)
	return r
}

// medianInterval is the median time between consecutive samples; 1 s when
// there is only one sample (nvidia-smi -l's default period).
func medianInterval(s []Sample) time.Duration {
	var d []time.Duration
	for i := 1; i < len(s); i++ {
		if dt := s[i].Time.Sub(s[i-1].Time); dt > 0 {
			d = append(d, dt)
		}
	}
	if len(d) == 0 {
		return time.Second
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// sampleCoverage is the time sample i stands for: until the next sample,
// unless the log has a gap (nvidia-smi stopped), then one interval.
func sampleCoverage(s []Sample, i int, interval time.Duration) time.Duration {
	if i+1 < len(s) {
		if dt := s[i+1].Time.Sub(s[i].Time); dt >= 0 && dt <= 5*interval {
			return dt
		}
	}
	return interval
}

// periodsWhere groups consecutive samples for which in is true into
// periods, splitting at gaps in the log.
func periodsWhere(s []Sample, interval time.Duration, in func(Sample) bool) []Period {
	var out []Period
	var cur *Period
	var usedSum, utilSum float64
	var usedN, utilN int
	closePeriod := func() {
		if cur == nil {
			return
		}
		cur.Duration = cur.End.Sub(cur.Start)
		if usedN > 0 {
			cur.MeanUsedBytes = int64(math.Round(usedSum / float64(usedN)))
		}
		cur.MeanUtilGPUPct = -1
		if utilN > 0 {
			cur.MeanUtilGPUPct = utilSum / float64(utilN)
		}
		out = append(out, *cur)
		cur = nil
	}
	for i, x := range s {
		if !in(x) {
			closePeriod()
			continue
		}
		if cur != nil && x.Time.Sub(cur.End) > 0 {
			// The previous sample's coverage ended before this one: a gap.
			closePeriod()
		}
		if cur == nil {
			cur = &Period{Start: x.Time}
			usedSum, utilSum, usedN, utilN = 0, 0, 0, 0
		}
		cur.End = x.Time.Add(sampleCoverage(s, i, interval))
		cur.Samples++
		if x.UsedBytes >= 0 {
			usedSum += float64(x.UsedBytes)
			usedN++
			cur.MaxUsedBytes = max(cur.MaxUsedBytes, x.UsedBytes)
		}
		if x.UtilGPUPct >= 0 {
			utilSum += x.UtilGPUPct
			utilN++
		}
	}
	closePeriod()
	return out
}

func starvationPeriods(s []Sample, r GPUReport, opts Options) []Period {
	if r.MaxUtilGPUPct < 0 || r.PeakUsedBytes <= 0 {
		return nil
	}
	floor := max(int64(math.Ceil(opts.StarveMemFraction*float64(r.PeakUsedBytes))), opts.StarveMinBytes)
	all := periodsWhere(s, r.Interval, func(x Sample) bool {
		return x.UsedBytes >= floor && x.UtilGPUPct >= 0 && x.UtilGPUPct <= opts.StarveUtilPct
	})
	var out []Period
	for _, p := range all {
		if p.Duration >= opts.MinStarveDuration {
			out = append(out, p)
		}
	}
	return out
}

func thresholdAlarm(s []Sample, r GPUReport, opts Options) ThresholdAlarm {
	a := ThresholdAlarm{Threshold: opts.Threshold, ThresholdBytes: -1}
	if r.TotalBytes <= 0 {
		return a
	}
	a.ThresholdBytes = int64(math.Ceil(opts.Threshold * float64(r.TotalBytes)))
	a.Periods = periodsWhere(s, r.Interval, func(x Sample) bool {
		return x.UsedBytes >= 0 && x.UsedBytes > a.ThresholdBytes
	})
	for _, p := range a.Periods {
		a.Duration += p.Duration
		a.Samples += p.Samples
	}
	return a
}

// findGrowthRuns splits the memory.used series at real drops and, within
// each drop-free segment, takes the run from the last sample before the
// first new high to the segment's high. Each run is judged as a leak; if
// the whole run is not (a fast start-up ramp before a slow leak, or a
// final jump after one), the longest qualifying part is looked for by
// trimming whole rises off either end.
func findGrowthRuns(all []Sample, opts Options, nearZero int64) (runs, leaks []GrowthRun) {
	// Samples without memory.used are skipped; pos maps back.
	var pos []int
	for i, x := range all {
		if x.UsedBytes >= 0 {
			pos = append(pos, i)
		}
	}
	n := len(pos)
	used := func(k int) int64 { return all[pos[k]].UsedBytes }
	for i := 0; i < n; {
		peak, peakAt := used(i), i
		base := used(i)
		firstRise := -1
		j := i + 1
		for ; j < n; j++ {
			v := used(j)
			jitter := max(opts.JitterBytes, int64(opts.JitterFraction*float64(peak-base)))
			if v < peak-jitter {
				break
			}
			if v > peak {
				if firstRise < 0 {
					firstRise = j
				}
				peak, peakAt = v, j
			}
		}
		if firstRise > 0 {
			run, leak, ok := judgeRun(all, pos, firstRise-1, peakAt, opts)
			if ok {
				// How the run ended: the log ended, or memory dropped.
				// The drop's floor is the lowest of the next few samples,
				// as a process frees its memory over a second or two.
				if j < n {
					low := j
					for k := j + 1; k < min(j+5, n); k++ {
						if used(k) < used(low) {
							low = k
						}
					}
					run.DroppedTo, run.DropTime = used(low), all[pos[low]].Time
					// Memory given back while the GPU stays in use is a
					// cache growing and being flushed (empty_cache, or the
					// allocator freeing its cache to retry a cudaMalloc),
					// not memory lost for good.
					run.Released = used(low) > nearZero && float64(run.EndBytes-used(low)) >= 0.5*float64(run.GrowthBytes)
				}
				// How long memory then held at its high with no new one:
				// to the drop, else to the log's end.
				plateau := all[pos[j-1]].Time.Sub(all[pos[peakAt]].Time)
				if leak != nil {
					leak.DroppedTo, leak.DropTime, leak.Released = run.DroppedTo, run.DropTime, run.Released
					if !run.Released && plateau >= max(opts.MinGrowthDuration, leak.Duration) {
						// Growth that stopped and held flat at least as long
						// as it grew, the process still alive: a model and
						// data loaded (from_pretrained fills memory tensor by
						// tensor, as smoothly as a leak), or a cache that
						// filled. A leak keeps taking memory while the job
						// runs.
						run.Leak, run.Reason = false, fmt.Sprintf("then flat for %s with no new high (it grew for %s): memory loaded or a cache filled once, not a leak",
							roundDuration(plateau), roundDuration(leak.Duration))
						leak = nil
					}
					if leak != nil && run.Released {
						why := fmt.Sprintf("released: fell to %s at %s with the GPU still in use (a cache grown, then flushed)",
							memtimeline.FormatBytes(run.DroppedTo), run.DropTime.Format(TimeLayout))
						run.Leak, run.Reason = false, why
						leak = nil
					}
				}
				runs = append(runs, run)
				if leak != nil {
					leaks = append(leaks, *leak)
				}
			}
		}
		i = j
	}
	sort.SliceStable(leaks, func(a, b int) bool { return leaks[a].Duration > leaks[b].Duration })
	return runs, leaks
}

// StillGrowingFactor: a run whose last rise is followed, before the
// process ends or the log does, by at most this many times the spacing of
// its last rises (plus ExitAllowance) was still growing at the end.
const StillGrowingFactor = 2

// A run still growing at the end is reported only when its recent rises
// are at least this many over at least this long: fewer are a start-up
// ramp that the end cut short, which tells nothing.
const (
	StillGrowingMinRises    = 4
	StillGrowingMinDuration = 2 * time.Second
)

// ExitAllowance is the time a process takes from its last step to giving
// its memory back (the Python interpreter's teardown, files written at
// exit), allowed on top of StillGrowingFactor.
const ExitAllowance = time.Second

// stillGrowing returns the last run that is not a leak and was still
// rising at its end, or nil. The run returned covers its recent rises
// only (those of about the size and spacing of the last three), so that
// its rate is the growth's, not the start-up's.
func stillGrowing(s []Sample, runs []GrowthRun) *GrowthRun {
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.Leak || r.Released {
			continue
		}
		// The run's new highs: sample index and size of the rise.
		var at []int
		var size []int64
		high := s[r.StartSample].UsedBytes
		for k := r.StartSample + 1; k <= r.EndSample && k < len(s); k++ {
			if v := s[k].UsedBytes; v > high {
				at, size = append(at, k), append(size, v-high)
				high = v
			}
		}
		n := len(at)
		if n < 4 {
			continue
		}
		// The spacing and size of its recent rises: medians of the last
		// three, so that one long stall (a first step compiling kernels)
		// or one big jump (the optimizer's state) does not stretch them.
		var gaps, sizes []int64
		for k := n - 3; k < n; k++ {
			gaps = append(gaps, int64(s[at[k]].Time.Sub(s[at[k-1]].Time)))
			sizes = append(sizes, size[k])
		}
		spacing, typical := time.Duration(median64(gaps)), median64(sizes)
		// The end of its plateau: the first sample that falls below its
		// high, else the log's end.
		end := s[len(s)-1].Time
		for k := r.EndSample + 1; k < len(s); k++ {
			if s[k].UsedBytes >= 0 && s[k].UsedBytes < r.EndBytes {
				end = s[k].Time
				break
			}
		}
		if end.Sub(s[at[n-1]].Time) > StillGrowingFactor*spacing+ExitAllowance {
			return nil // the last run settled: earlier ones did too
		}
		first := n - 1
		for first > 0 && size[first-1] < 2*typical && s[at[first]].Time.Sub(s[at[first-1]].Time) <= 3*spacing {
			first--
		}
		// From the sample before the first recent rise to the last high.
		from := at[first] - 1
		for from > r.StartSample && s[from].UsedBytes < 0 {
			from--
		}
		w := GrowthRun{Start: s[from].Time, End: s[at[n-1]].Time, StartSample: from, EndSample: at[n-1], Rises: n - first,
			StartBytes: s[from].UsedBytes, EndBytes: s[at[n-1]].UsedBytes, DroppedTo: r.DroppedTo, DropTime: r.DropTime}
		w.Duration, w.GrowthBytes = w.End.Sub(w.Start), w.EndBytes-w.StartBytes
		var pos []int
		for k := from; k <= at[n-1]; k++ {
			if s[k].UsedBytes >= 0 {
				pos = append(pos, k)
			}
		}
		w.Samples = len(pos)
		slope, r2 := newRunFit(s, pos, 0, len(pos)-1).fit(0, len(pos)-1)
		w.SlopeBytesPerSec, w.R2 = slope*(1<<20), r2
		for k := first; k < n; k++ {
			w.LargestRiseBytes = max(w.LargestRiseBytes, size[k])
		}
		if w.Rises < StillGrowingMinRises || w.Duration < StillGrowingMinDuration || w.GrowthBytes <= 0 {
			return nil // a start-up ramp cut short by the end: nothing to go on
		}
		w.Reason = fmt.Sprintf("still rising when the process or the log ended: %d rises of about %s every %s, the last %s before the end",
			w.Rises, memtimeline.FormatBytes(typical), roundDuration(spacing), roundDuration(end.Sub(w.End)))
		return &w
	}
	return nil
}

// runFit holds prefix sums over a run for O(1) least-squares fits of any
// window. x is seconds since the run's start, y MiB above its first value:
// small numbers keep the float64 sums exact enough.
type runFit struct {
	x, y                  []float64
	sx, sy, sxx, sxy, syy []float64
}

func newRunFit(all []Sample, pos []int, s, e int) *runFit {
	m := e - s + 1
	f := &runFit{x: make([]float64, m), y: make([]float64, m),
		sx: make([]float64, m+1), sy: make([]float64, m+1), sxx: make([]float64, m+1),
		sxy: make([]float64, m+1), syy: make([]float64, m+1)}
	t0, y0 := all[pos[s]].Time, all[pos[s]].UsedBytes
	for k := 0; k < m; k++ {
		x := all[pos[s+k]].Time.Sub(t0).Seconds()
		y := float64(all[pos[s+k]].UsedBytes-y0) / (1 << 20)
		f.x[k], f.y[k] = x, y
		f.sx[k+1] = f.sx[k] + x
		f.sy[k+1] = f.sy[k] + y
		f.sxx[k+1] = f.sxx[k] + x*x
		f.sxy[k+1] = f.sxy[k] + x*y
		f.syy[k+1] = f.syy[k] + y*y
	}
	return f
}

// fit returns the slope (MiB/s) and R^2 of samples a..b of the run.
func (f *runFit) fit(a, b int) (slope, r2 float64) {
	n := float64(b - a + 1)
	if n < 2 {
		return 0, 0
	}
	sx, sy := f.sx[b+1]-f.sx[a], f.sy[b+1]-f.sy[a]
	sxx := f.sxx[b+1] - f.sxx[a] - sx*sx/n
	sxy := f.sxy[b+1] - f.sxy[a] - sx*sy/n
	syy := f.syy[b+1] - f.syy[a] - sy*sy/n
	if sxx <= 0 {
		return 0, 0
	}
	slope = sxy / sxx
	if syy <= 0 {
		return slope, 0
	}
	r2 = sxy * sxy / (sxx * syy)
	return slope, min(max(r2, 0), 1)
}

// judgeRun describes the run over compact samples s..e, judges it, and
// finds its leak window. ok is false for runs too small to report.
func judgeRun(all []Sample, pos []int, s, e int, opts Options) (run GrowthRun, leak *GrowthRun, ok bool) {
	if all[pos[e]].UsedBytes-all[pos[s]].UsedBytes < opts.MinGrowthBytes {
		return run, nil, false
	}
	f := newRunFit(all, pos, s, e)
	// New highs within the run (relative positions) and their sizes.
	var riseAt []int
	var riseSize []int64
	high := all[pos[s]].UsedBytes
	for k := s + 1; k <= e; k++ {
		if v := all[pos[k]].UsedBytes; v > high {
			riseAt = append(riseAt, k-s)
			riseSize = append(riseSize, v-high)
			high = v
		}
	}
	R := len(riseAt)
	prefMax := make([]int64, R) // largest of rises 0..j
	sufMax := make([]int64, R)  // largest of rises j..R-1
	for j := 0; j < R; j++ {
		prefMax[j] = riseSize[j]
		if j > 0 {
			prefMax[j] = max(prefMax[j], prefMax[j-1])
		}
	}
	for j := R - 1; j >= 0; j-- {
		sufMax[j] = riseSize[j]
		if j < R-1 {
			sufMax[j] = max(sufMax[j], sufMax[j+1])
		}
	}
	// window describes relative samples a..b holding rises lo..hi.
	var window func(a, b, lo, hi int) GrowthRun
	window = func(a, b, lo, hi int) GrowthRun {
		ga, gb := all[pos[s+a]], all[pos[s+b]]
		w := GrowthRun{
			DroppedTo: -1,
			Start:     ga.Time, End: gb.Time, StartSample: pos[s+a], EndSample: pos[s+b],
			Duration: gb.Time.Sub(ga.Time), Samples: b - a + 1, Rises: hi - lo + 1,
			StartBytes: ga.UsedBytes, EndBytes: gb.UsedBytes, GrowthBytes: gb.UsedBytes - ga.UsedBytes,
		}
		for j := lo; j <= hi; j++ {
			w.LargestRiseBytes = max(w.LargestRiseBytes, riseSize[j])
			prev := a
			if j > lo {
				prev = riseAt[j-1]
			}
			w.LongestStall = max(w.LongestStall, all[pos[s+riseAt[j]]].Time.Sub(all[pos[s+prev]].Time))
		}
		slope, r2 := f.fit(a, b)
		w.SlopeBytesPerSec, w.R2 = slope*(1<<20), r2
		w.Leak, w.Reason = judgeWindow(w, opts)
		// The growth model of a step series (one sample a step) has the
		// last word on regularity: a staircase, or a trend significant by
		// Mann-Kendall, from its change point on, is growth whatever the
		// size of its rises and however well a straight line fits.
		res := modelOf(all, pos, s+a, s+b)
		if res.Verdict != growth.Growth {
			if w.Leak {
				w.Leak, w.Reason = false, res.Describe("memory.used (the growth model, one sample a step)")
			}
			return w
		}
		if w.Leak {
			return w
		}
		m := w
		if st := int(res.Start); st > 0 && a+st < b {
			// From the model's start: the window holding the rises after it.
			nlo := lo
			for nlo <= hi && riseAt[nlo] <= a+st {
				nlo++
			}
			if nlo > hi {
				return w
			}
			if m = window(a+st, b, nlo, hi); m.Leak {
				return m
			}
		}
		if m.Duration < opts.MinGrowthDuration || m.Samples < opts.MinGrowthSamples || m.Rises < opts.MinGrowthRises {
			return w
		}
		m.Leak, m.Reason = true, growthReason(res, m)
		// The rate is the model's (Theil-Sen, or jump / period: a
		// one-time jump inside the growth does not steepen it), per
		// sample, over the mean sampling interval.
		if m.Samples > 1 && m.Duration > 0 {
			m.SlopeBytesPerSec = res.BytesPerStep * float64(m.Samples-1) / m.Duration.Seconds()
		}
		return m
	}
	run = window(0, e-s, 0, R-1)
	if run.Leak {
		l := run
		return run, &l, true
	}
	// quick reports whether a window could qualify, from O(1) numbers, so
	// that only candidates worth describing are described.
	quick := func(a, b int, rises int, largest int64) bool {
		ga, gb := all[pos[s+a]], all[pos[s+b]]
		growth := gb.UsedBytes - ga.UsedBytes
		if gb.Time.Sub(ga.Time) < opts.MinGrowthDuration || b-a+1 < opts.MinGrowthSamples ||
			rises < opts.MinGrowthRises || growth < opts.MinGrowthBytes ||
			float64(largest) > opts.MaxRiseFraction*float64(growth) {
			return false
		}
		slope, r2 := f.fit(a, b)
		return slope > 0 && r2 >= opts.MinGrowthR2
	}
	var best *GrowthRun
	// Trim rises off the start: the window starts just before rise j.
	for j := 1; j < R; j++ {
		if quick(riseAt[j]-1, e-s, R-j, sufMax[j]) {
			w := window(riseAt[j]-1, e-s, j, R-1)
			best = &w
			break
		}
	}
	// Trim rises off the end: the window ends at rise j.
	for j := R - 2; j >= 0; j-- {
		if quick(0, riseAt[j], j+1, prefMax[j]) {
			w := window(0, riseAt[j], 0, j)
			if best == nil || w.Duration > best.Duration {
				best = &w
			}
			break
		}
	}
	if best != nil && best.Leak {
		run.Reason = fmt.Sprintf("steady growth from %s to %s within this run", best.Start.Format(TimeLayout), best.End.Format(TimeLayout))
		run.Leak = true
		return run, best, true
	}
	return run, nil, true
}

// judgeWindow applies the leak criteria; when the window fails, the
// reason lists every criterion it fails, the most telling first.
func judgeWindow(w GrowthRun, o Options) (bool, string) {
	var fails []string
	if w.GrowthBytes > 0 && float64(w.LargestRiseBytes) > o.MaxRiseFraction*float64(w.GrowthBytes) {
		fails = append(fails, fmt.Sprintf("one jump is %.0f%% of the growth",
			100*float64(w.LargestRiseBytes)/float64(w.GrowthBytes)))
	}
	if w.SlopeBytesPerSec <= 0 || w.R2 < o.MinGrowthR2 {
		fails = append(fails, fmt.Sprintf("R^2 %.2f < %.2f", w.R2, o.MinGrowthR2))
	}
	if w.Duration < o.MinGrowthDuration {
		fails = append(fails, fmt.Sprintf("lasted %s < %s", roundDuration(w.Duration), o.MinGrowthDuration))
	}
	if w.Samples < o.MinGrowthSamples {
		fails = append(fails, fmt.Sprintf("%d samples < %d", w.Samples, o.MinGrowthSamples))
	}
	if w.Rises < o.MinGrowthRises {
		fails = append(fails, fmt.Sprintf("%d new highs < %d", w.Rises, o.MinGrowthRises))
	}
	if w.GrowthBytes < o.MinGrowthBytes {
		fails = append(fails, fmt.Sprintf("grew %s < %s", memtimeline.FormatBytes(w.GrowthBytes), memtimeline.FormatBytes(o.MinGrowthBytes)))
	}
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ")
	}
	return true, fmt.Sprintf("steady growth: %d new highs over %s, R^2 %.3f", w.Rises, roundDuration(w.Duration), w.R2)
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// Bucket summarizes the samples of one time slice of a GPU's log, for
// charts and sparklines: min and max keep short spikes visible.
type Bucket struct {
	Start        time.Time
	End          time.Time
	Samples      int
	MinUsedBytes int64 // -1 when no sample in the slice has memory.used
	MaxUsedBytes int64
	// MeanUtilGPUPct is -1 when no sample has utilization.gpu.
	MeanUtilGPUPct float64
}

// Buckets cuts g's time span into n equal slices. Slices the log has no
// samples in (nvidia-smi stopped) have Samples 0.
func Buckets(g *GPU, n int) []Bucket {
	if g == nil || len(g.Samples) == 0 || n <= 0 {
		return nil
	}
	start, end := g.Samples[0].Time, g.Samples[len(g.Samples)-1].Time
	span := end.Sub(start)
	if span <= 0 {
		n = 1
	}
	out := make([]Bucket, n)
	for i := range out {
		out[i] = Bucket{
			Start:        start.Add(span * time.Duration(i) / time.Duration(n)),
			End:          start.Add(span * time.Duration(i+1) / time.Duration(n)),
			MinUsedBytes: -1, MaxUsedBytes: -1, MeanUtilGPUPct: -1,
		}
	}
	utilSum := make([]float64, n)
	utilN := make([]int, n)
	for _, x := range g.Samples {
		i := 0
		if span > 0 {
			// float: an hours-long span times n overflows int64 ns.
			i = int(float64(x.Time.Sub(start)) / float64(span) * float64(n))
		}
		i = min(max(i, 0), n-1)
		b := &out[i]
		b.Samples++
		if x.UsedBytes >= 0 {
			if b.MinUsedBytes < 0 || x.UsedBytes < b.MinUsedBytes {
				b.MinUsedBytes = x.UsedBytes
			}
			b.MaxUsedBytes = max(b.MaxUsedBytes, x.UsedBytes)
		}
		if x.UtilGPUPct >= 0 {
			utilSum[i] += x.UtilGPUPct
			utilN[i]++
		}
	}
	for i := range out {
		if utilN[i] > 0 {
			out[i].MeanUtilGPUPct = utilSum[i] / float64(utilN[i])
		}
	}
	return out
}

// modelOf is the growth model's (memtimeline/growth) reading of samples
// a..b (compact indices), one sample a step: its Start is relative to a.
func modelOf(all []Sample, pos []int, a, b int) growth.Result {
	steps := make([]int64, 0, b-a+1)
	vals := make([]float64, 0, b-a+1)
	for k := a; k <= b; k++ {
		steps = append(steps, int64(k-a))
		vals = append(vals, float64(all[pos[k]].UsedBytes))
	}
	return growth.Analyze(steps, vals, growth.Default())
}

// growthReason says a window the growth model calls growth.
func growthReason(res growth.Result, w GrowthRun) string {
	if res.Staircase {
		return fmt.Sprintf("regular growth (the growth model): %d jumps of %s, one every %d samples, over %s",
			res.Jumps, memtimeline.FormatBytes(int64(res.Jump)), res.Period, roundDuration(w.Duration))
	}
	return fmt.Sprintf("regular growth (the growth model): a significant trend (Mann-Kendall z %.1f) over %d samples, %s",
		res.Z, w.Samples, roundDuration(w.Duration))
}
