package steplog

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
)

// Pinned host memory. A DataLoader with pin_memory=True, or a cache that
// keeps pinned tensors, holds page-locked host memory that no GPU figure
// shows. torch.cuda.host_memory_stats() counts it (the snippet writes it
// with each steps line, prefixed "host."), and it is judged like device
// memory: by the regularity rule over the steps (Regularity), on the bytes
// the caching host allocator holds (host.allocated_bytes.current:
// cudaHostAlloc'd, in use or cached for reuse; it gives them back only on
// empty_cache), else on the bytes in use (host.active_bytes.current).
// Held bytes come first: torch 2.11's active_bytes.current takes 1 byte,
// not the block's size, off at each free, so a healthy pin_memory=True
// DataLoader (testdata/gpu/round4/pinned_loader_clean: one 1 MiB block
// reused every step) reads as 1 MiB more in use every step.

// HostReport is pinned host memory over the steps of one series.
type HostReport struct {
	Device    string `json:"device,omitempty"`
	Records   int    `json:"records"`
	FirstStep int64  `json:"first_step"`
	LastStep  int64  `json:"last_step"`
	// Figure names what was judged: "held" (allocated bytes: in use or
	// cached) or "in use" (active bytes, when the log has no held bytes).
	Figure string `json:"figure"`
	// Verdict is growing, flat or unknown (as Analyze's).
	Verdict      string  `json:"verdict"`
	Growth       *Growth `json:"growth,omitempty"`
	BytesPerStep int64   `json:"bytes_per_step"`
	// FirstBytes, LastBytes and PeakBytes are the judged figure's; HeldBytes
	// the last record's held (cudaHostAlloc'd) bytes, -1 when the log has
	// none.
	FirstBytes int64  `json:"first_bytes"`
	LastBytes  int64  `json:"last_bytes"`
	PeakBytes  int64  `json:"peak_bytes"`
	HeldBytes  int64  `json:"held_bytes"`
	Reason     string `json:"reason"`
}

// AnalyzeHost judges the series' pinned host memory; nil when no record
// has it.
func AnalyzeHost(s *Series, opts Options) *HostReport {
	value := func(r Record) int64 { return r.HostAllocatedBytes }
	figure := "held"
	has := func(get func(Record) int64) bool {
		for _, r := range s.Records {
			if get(r) >= 0 {
				return true
			}
		}
		return false
	}
	if !has(value) {
		value, figure = func(r Record) int64 { return r.HostActiveBytes }, "in use"
		if !has(value) {
			return nil
		}
	}
	rep := &HostReport{Device: s.Device, Figure: figure, Verdict: VerdictUnknown, HeldBytes: -1, FirstBytes: -1, PeakBytes: -1}
	var steps, vals []int64
	for _, r := range s.Records {
		if v := value(r); v >= 0 {
			steps, vals = append(steps, r.Step), append(vals, v)
			rep.PeakBytes = max(rep.PeakBytes, v)
		}
		if r.HostAllocatedBytes >= 0 {
			rep.HeldBytes = r.HostAllocatedBytes
		}
	}
	rep.Records = len(vals)
	rep.FirstStep, rep.LastStep = steps[0], steps[len(steps)-1]
	rep.FirstBytes, rep.LastBytes = vals[0], vals[len(vals)-1]
	skip := 0
	if len(vals)-opts.WarmupSteps >= opts.MinFitSteps {
		skip = max(opts.WarmupSteps, 0)
	}
	steps, vals = steps[skip:], vals[skip:]
	if len(vals) < opts.MinFitSteps {
		rep.Reason = fmt.Sprintf("%d steps with pinned host memory, need %d", len(vals), opts.MinFitSteps)
		return rep
	}
	g, noisy := Regularity(steps, vals)
	rep.Growth = g
	from, to := steps[0], steps[len(steps)-1]
	switch {
	case g != nil && !g.Bounded:
		rep.Verdict, rep.BytesPerStep = VerdictGrowing, g.BytesPerStep
		if g.Period == 1 {
			rep.Reason = fmt.Sprintf("pinned host memory grows %s per step over steps %d..%d (%s %s now)", memtimeline.FormatBytes(g.BytesPerStep), g.FirstStep, g.LastStep, memtimeline.FormatBytes(rep.LastBytes), figure)
		} else {
			rep.Reason = fmt.Sprintf("pinned host memory grows %s every %d steps (%d rises, steps %d..%d): %s per step (%s %s now)", memtimeline.FormatBytes(g.RiseBytes), g.Period, g.Rises, g.FirstStep, g.LastStep, memtimeline.FormatBytes(g.BytesPerStep), memtimeline.FormatBytes(rep.LastBytes), figure)
		}
		if g.Accelerating {
			rep.Reason += ", more each time"
		}
	case g != nil:
		rep.Verdict = VerdictFlat
		rep.Reason = fmt.Sprintf("pinned host memory %s filled by %s a step over steps %d..%d, then stayed flat for %d steps: bounded (a pool or queue that filled up)", figure, memtimeline.FormatBytes(g.RiseBytes), g.FirstStep, g.LastStep, g.FlatAfter)
	case noisy:
		rep.Verdict = VerdictFlat
		rep.Reason = fmt.Sprintf("pinned host memory %s rises and falls alike over steps %d..%d: no regular growth", figure, from, to)
	default:
		rep.Verdict = VerdictFlat
		lo, hi := vals[0], vals[0]
		for _, v := range vals {
			lo, hi = min(lo, v), max(hi, v)
		}
		if lo == hi {
			rep.Reason = fmt.Sprintf("pinned host memory %s steady at %s over steps %d..%d", figure, memtimeline.FormatBytes(lo), from, to)
		} else {
			rep.Reason = fmt.Sprintf("pinned host memory %s between %s and %s over steps %d..%d, no regular growth", figure, memtimeline.FormatBytes(lo), memtimeline.FormatBytes(hi), from, to)
		}
	}
	return rep
}
