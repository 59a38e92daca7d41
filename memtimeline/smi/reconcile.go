package smi

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/torchmem/torchmem/memtimeline"
)

// "nvidia-smi says 8 GB but PyTorch runs out of memory: which number is
// right?" Both are. memory.used is every byte the driver handed out on the
// GPU: torch's reserved memory (what it allocated, plus the cache it keeps
// for reuse), and what lives outside torch's allocator: the CUDA context,
// library workspaces, other processes. Reconcile puts torch's own numbers
// (a steps log's memory_allocated() and memory_reserved() per step) on the
// smi log's timeline and splits memory.used into those parts.

// TorchPoint is torch's own figures at one moment (a step of a steps log).
type TorchPoint struct {
	Step           int64
	Time           time.Time // Unix wall clock (time.time())
	AllocatedBytes int64
	ReservedBytes  int64
}

// ReconciledPoint is one step put beside the smi sample nearest it.
type ReconciledPoint struct {
	Step           int64     `json:"step"`
	Time           time.Time `json:"time"`
	UsedBytes      int64     `json:"used_bytes"`
	AllocatedBytes int64     `json:"allocated_bytes"`
	// CacheBytes is reserved but free: torch's cache.
	CacheBytes int64 `json:"cache_bytes"`
	// OutsideBytes is memory.used - reserved: outside torch's allocator.
	OutsideBytes int64 `json:"outside_bytes"`
	// ProcessBytes is torch's process's own figure from a compute-apps
	// log, -1 without one.
	ProcessBytes int64 `json:"process_bytes"`
	// Stable: reserved did not change from the step before to the step
	// after, so the smi sample saw this very reserved figure.
	Stable bool `json:"stable"`
}

// Reconciliation splits memory.used of one GPU by torch's own numbers.
type Reconciliation struct {
	GPUKey string `json:"gpu_key"`
	// ClockOffset is what was added to the smi log's times to put them on
	// the steps log's clock: nvidia-smi prints local time without a zone,
	// time.time() is UTC; zero when the machine ran in UTC.
	ClockOffset time.Duration `json:"clock_offset_ns"`
	// Steps is how many steps of the torch log fall inside the smi log;
	// Stable how many of those the figures below rest on.
	Steps  int `json:"steps"`
	Stable int `json:"stable"`
	// The split at the last stable step.
	At ReconciledPoint `json:"at"`
	// GapBytes is the median of memory.used - reserved over the stable
	// steps; GapMin and GapMax its range. Constant: the range is at most
	// GapTolerance (the CUDA context and library workspaces, which do not
	// change once made).
	GapBytes int64 `json:"gap_bytes"`
	GapMin   int64 `json:"gap_min_bytes"`
	GapMax   int64 `json:"gap_max_bytes"`
	Constant bool  `json:"constant"`
	// GapGrowthBytes is how much the gap grew from the first stable step to
	// the last while reserved grew ReservedGrowthBytes; GapGrows is set
	// when the gap grew by at least GapGrowthMin more than reserved did:
	// memory outside torch's allocator.
	GapGrowthBytes      int64 `json:"gap_growth_bytes"`
	ReservedGrowthBytes int64 `json:"reserved_growth_bytes"`
	GapGrows            bool  `json:"gap_grows"`
	// TorchPID is the compute-apps process whose memory follows torch's
	// reserved (used - reserved constant), -1 when there is no apps log or
	// none does; ProcessGapBytes that constant (the context of torch's own
	// process).
	TorchPID        int64  `json:"torch_pid"`
	TorchName       string `json:"torch_process,omitempty"`
	ProcessGapBytes int64  `json:"process_gap_bytes"`
	// OthersBytes is what the other processes on the GPU held at the last
	// stable step (-1 without an apps log).
	OthersBytes int64 `json:"others_bytes"`
	// Points are every step inside the smi log.
	Points []ReconciledPoint `json:"-"`
}

// GapTolerance is how far memory.used - reserved may move and still be
// called constant: nvidia-smi prints whole MiB, so the gap is read to the
// MiB.
const GapTolerance = 1 << 20

// GapGrowthMin is how much the gap between nvidia-smi and torch's
// reserved must grow to be memory growing outside torch (well above
// nvidia-smi's 1 MiB resolution and a CUDA context's workspaces).
const GapGrowthMin = 64 << 20

// ClockOffset finds the offset (a multiple of 15 minutes, within a day's
// time zones) that puts the most torch points inside the smi samples'
// span; ties go to the smallest offset. ok is false when no offset puts
// any point inside: the two logs are not of the same time.
func ClockOffset(s []Sample, pts []TorchPoint) (time.Duration, int, bool) {
	if len(s) == 0 || len(pts) == 0 {
		return 0, 0, false
	}
	start, end := s[0].Time, s[len(s)-1].Time
	times := make([]time.Time, len(pts))
	for i, p := range pts {
		times[i] = p.Time
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	best, bestN := time.Duration(0), 0
	for k := 0; k <= 2*14*4; k++ {
		// 0, +15m, -15m, +30m, ...: the smallest offset first.
		off := time.Duration((k+1)/2) * 15 * time.Minute
		if k%2 == 0 {
			off = -off
		}
		// Points whose time - off lies in [start, end].
		lo := sort.Search(len(times), func(i int) bool { return !times[i].Add(-off).Before(start) })
		hi := sort.Search(len(times), func(i int) bool { return times[i].Add(-off).After(end) })
		if n := hi - lo; n > bestN {
			best, bestN = off, n
		}
	}
	return best, bestN, bestN > 0
}

// Reconcile splits g's memory.used at every torch point inside the log.
// procs (may be nil) are the compute-apps processes on this GPU, for
// which process is torch's. ok is false when the two logs do not overlap.
func Reconcile(g *GPU, pts []TorchPoint, procs []*Process, opts Options) (Reconciliation, bool) {
	r := Reconciliation{TorchPID: -1, OthersBytes: -1, ProcessGapBytes: -1}
	if g == nil {
		return r, false
	}
	r.GPUKey = g.Key
	pts = append([]TorchPoint(nil), pts...)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Time.Before(pts[j].Time) })
	off, _, ok := ClockOffset(g.Samples, pts)
	if !ok {
		return r, false
	}
	r.ClockOffset = off
	s := g.Samples
	interval := medianInterval(s)
	start, end := s[0].Time, s[len(s)-1].Time
	for i, p := range pts {
		t := p.Time.Add(-off)
		if t.Before(start) || t.After(end) || p.ReservedBytes < 0 {
			continue
		}
		// The smi sample to compare: the one nearest the step, within the
		// steps on either side when reserved holds still across them.
		j := nearestSample(s, t)
		if j < 0 || s[j].UsedBytes < 0 || absDuration(s[j].Time.Sub(t)) > 2*interval {
			continue
		}
		stable := i > 0 && i+1 < len(pts) &&
			pts[i-1].ReservedBytes == p.ReservedBytes && pts[i+1].ReservedBytes == p.ReservedBytes
		if stable {
			// Any sample between the neighbouring steps saw this reserved.
			lo, hi := pts[i-1].Time.Add(-off), pts[i+1].Time.Add(-off)
			stable = !s[j].Time.Before(lo) && !s[j].Time.After(hi)
		}
		rp := ReconciledPoint{Step: p.Step, Time: p.Time, UsedBytes: s[j].UsedBytes, AllocatedBytes: p.AllocatedBytes,
			CacheBytes: p.ReservedBytes - p.AllocatedBytes, OutsideBytes: s[j].UsedBytes - p.ReservedBytes, ProcessBytes: -1, Stable: stable}
		if p.AllocatedBytes < 0 {
			rp.CacheBytes = -1
		}
		r.Points = append(r.Points, rp)
	}
	r.Steps = len(r.Points)
	if r.Steps == 0 {
		return r, false
	}
	var gaps []int64
	var first, last *ReconciledPoint
	var firstRes, lastRes int64
	for i := range r.Points {
		p := &r.Points[i]
		if !p.Stable {
			continue
		}
		gaps = append(gaps, p.OutsideBytes)
		if first == nil {
			first = p
			firstRes = p.UsedBytes - p.OutsideBytes
		}
		last = p
		lastRes = p.UsedBytes - p.OutsideBytes
	}
	r.Stable = len(gaps)
	if r.Stable == 0 {
		// No step with reserved holding still: use every point, and say so
		// by Stable = 0.
		for i := range r.Points {
			gaps = append(gaps, r.Points[i].OutsideBytes)
		}
		first, last = &r.Points[0], &r.Points[len(r.Points)-1]
		firstRes, lastRes = first.UsedBytes-first.OutsideBytes, last.UsedBytes-last.OutsideBytes
	}
	r.At = *last
	r.GapBytes = median64(gaps)
	r.GapMin, r.GapMax = gaps[0], gaps[0]
	for _, v := range gaps {
		r.GapMin, r.GapMax = min(r.GapMin, v), max(r.GapMax, v)
	}
	r.Constant = r.Stable > 0 && r.GapMax-r.GapMin <= GapTolerance
	r.GapGrowthBytes = last.OutsideBytes - first.OutsideBytes
	r.ReservedGrowthBytes = lastRes - firstRes
	r.GapGrows = r.GapGrowthBytes >= max(opts.MinGrowthBytes, GapGrowthMin)
	r.matchProcess(procs, pts, off)
	return r, true
}

// maxTorchCandidates bounds the processes tried as torch's.
const maxTorchCandidates = 64

// matchProcess finds torch's process among procs: the one whose memory
// minus reserved stays constant over the stable steps, the smallest such
// gap when several do; it fills the points' ProcessBytes and OthersBytes.
func (r *Reconciliation) matchProcess(procs []*Process, pts []TorchPoint, off time.Duration) {
	if procs == nil {
		return
	}
	type cand struct {
		p        *Process
		gaps     []int64
		lo, hi   int64
		bytesAt  map[int]int64
		coverage int
	}
	var best *cand
	if len(procs) > maxTorchCandidates {
		// A GPU holds a few processes; more is a hostile or broken log:
		// the ones with the most samples are tried.
		procs = slices.Clone(procs)
		slices.SortStableFunc(procs, func(a, b *Process) int { return len(b.Samples) - len(a.Samples) })
		procs = procs[:maxTorchCandidates]
	}
	for _, p := range procs {
		c := &cand{p: p, bytesAt: map[int]int64{}}
		var ps []Sample
		for _, x := range p.Samples {
			ps = append(ps, Sample{Time: x.Time, UsedBytes: x.UsedBytes})
		}
		if len(ps) == 0 {
			continue
		}
		interval := medianInterval(ps)
		for i, rp := range r.Points {
			t := rp.Time.Add(-off)
			j := nearestSample(ps, t)
			if j < 0 || ps[j].UsedBytes < 0 || absDuration(ps[j].Time.Sub(t)) > 2*interval {
				continue
			}
			c.bytesAt[i] = ps[j].UsedBytes
			if rp.Stable || r.Stable == 0 {
				g := ps[j].UsedBytes - (rp.UsedBytes - rp.OutsideBytes)
				c.gaps = append(c.gaps, g)
			}
		}
		if len(c.gaps) == 0 {
			continue
		}
		c.lo, c.hi = c.gaps[0], c.gaps[0]
		for _, g := range c.gaps {
			c.lo, c.hi = min(c.lo, g), max(c.hi, g)
		}
		if c.lo < 0 || c.hi-c.lo > GapTolerance {
			continue // holds less than torch reserved, or does not follow it
		}
		if best == nil || len(c.gaps) > len(best.gaps) || len(c.gaps) == len(best.gaps) && c.lo < best.lo {
			best = c
		}
	}
	if best == nil {
		return
	}
	r.TorchPID, r.TorchName = best.p.PID, best.p.Name
	r.ProcessGapBytes = median64(best.gaps)
	for i := range r.Points {
		if v, ok := best.bytesAt[i]; ok {
			r.Points[i].ProcessBytes = v
		}
	}
	r.At.ProcessBytes = -1
	for i := range r.Points {
		if r.Points[i].Step == r.At.Step && r.Points[i].Time.Equal(r.At.Time) {
			r.At.ProcessBytes = r.Points[i].ProcessBytes
		}
	}
	// The others, at the split's step.
	var others int64
	for _, p := range procs {
		if p == best.p {
			continue
		}
		var ps []Sample
		for _, x := range p.Samples {
			ps = append(ps, Sample{Time: x.Time, UsedBytes: x.UsedBytes})
		}
		t := r.At.Time.Add(-off)
		if j := nearestSample(ps, t); j >= 0 && ps[j].UsedBytes > 0 && absDuration(ps[j].Time.Sub(t)) <= 2*medianInterval(ps) {
			others += ps[j].UsedBytes
		}
	}
	r.OthersBytes = others
}

// Answer is the one sentence for "which number do I believe".
func (r Reconciliation) Answer() string {
	at := r.At
	fb := memtimeline.FormatBytes
	s := fmt.Sprintf("nvidia-smi %s at step %d = torch allocated %s + cache %s + outside torch %s",
		fb(at.UsedBytes), at.Step, fb(at.AllocatedBytes), fb(at.CacheBytes), fb(at.OutsideBytes))
	steady := fmt.Sprintf("%d steady steps", r.Stable)
	if r.Stable == 0 {
		steady = fmt.Sprintf("%d steps", r.Steps)
	}
	const context = "CUDA context, cuBLAS/cuDNN workspaces"
	both := ". Both are right: memory_reserved() is torch's share, the rest lives outside its allocator"
	switch {
	case r.TorchPID >= 0:
		// The process's own figure pins torch's share of the gap; the rest
		// is other processes and what no process holds.
		parts := []string{fmt.Sprintf("%s in torch's process %d, constant over %s: %s", fb(r.ProcessGapBytes), r.TorchPID, steady, context)}
		if r.OthersBytes > 0 {
			parts = append(parts, fb(r.OthersBytes)+" other processes")
		}
		if rest := at.OutsideBytes - r.ProcessGapBytes - max(r.OthersBytes, 0); rest != 0 {
			parts = append(parts, fb(rest)+" in no process (the driver's)")
		}
		return s + " (" + strings.Join(parts, "; ") + ")" + both
	case r.Constant:
		return s + fmt.Sprintf(" (constant over %s: %s)", steady, context) + both
	case r.GapGrows && r.GapGrowthBytes > r.ReservedGrowthBytes:
		return s + fmt.Sprintf("; outside torch grew %s while torch's reserved grew %s: memory outside torch's allocator (another process, NCCL buffers, a library's own cudaMalloc)",
			fb(r.GapGrowthBytes), fb(r.ReservedGrowthBytes))
	case r.Stable == 0:
		return s + fmt.Sprintf("; torch's reserved changed at every step, so no step pins the gap: %s to %s over %d steps", fb(r.GapMin), fb(r.GapMax), r.Steps)
	}
	return s + fmt.Sprintf("; outside torch ranged %s to %s over %s (other processes come and go: log --query-compute-apps beside it)", fb(r.GapMin), fb(r.GapMax), steady)
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " and " + s[len(s)-1]
}

// PerStep turns a growth run of g into bytes per step, by the steps whose
// times (Unix wall clock) fall inside it: the run's slope times the steps'
// mean duration. n is how many steps fell inside (fewer than 2: no figure).
func PerStep(g *GPU, run GrowthRun, stepTimes []time.Time) (bytesPerStep int64, n int) {
	if g == nil || len(stepTimes) < 2 || run.SlopeBytesPerSec <= 0 {
		return 0, 0
	}
	pts := make([]TorchPoint, len(stepTimes))
	for i, t := range stepTimes {
		pts[i] = TorchPoint{Time: t}
	}
	off, _, ok := ClockOffset(g.Samples, pts)
	if !ok {
		return 0, 0
	}
	var in []time.Time
	for _, t := range stepTimes {
		if t := t.Add(-off); !t.Before(run.Start) && !t.After(run.End) {
			in = append(in, t)
		}
	}
	if len(in) < 2 {
		return 0, len(in)
	}
	sort.Slice(in, func(i, j int) bool { return in[i].Before(in[j]) })
	perStep := in[len(in)-1].Sub(in[0]).Seconds() / float64(len(in)-1)
	return int64(math.Round(run.SlopeBytesPerSec * perStep)), len(in)
}
