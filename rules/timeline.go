package rules

// GPU-timeline detectors: what Nsight Systems users look for by eye in a
// profile (a blocking device-to-host copy every step, pageable uploads, an
// idle GPU, slow copies), computed from the Kineto trace's device lanes.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/torchmem/torchmem/internal/more"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/gpu"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

const (
	ruleSyncCopy       = "gpu.sync-copy-every-step"
	rulePageableH2D    = "gpu.pageable-h2d"
	rulePinnedBlocking = "gpu.pinned-h2d-blocking"
	ruleIdleGaps       = "gpu.idle-gaps"
	ruleLowMemcpyBW    = "gpu.low-memcpy-bandwidth"
	minBandwidthBytes  = 1 << 20 // copies smaller than this are latency-bound, not bandwidth-bound
	maxListedOperators = 3
	ruleLaunchBound    = "gpu.launch-bound"
)

func init() {
	register(&Rule{
		ID:          ruleSyncCopy,
		Description: "a device-to-host copy (loss.item(), .cpu(), print(tensor)) in nearly every profiler step: the host waits for the GPU each step",
		Severity:    Warning,
		Threshold:   0.9,
		Unit:        "fraction of steps",
		Reads:       []SourceKind{SourceTrace},
		Check:       checkSyncCopy,
	})
	register(&Rule{
		ID: rulePinnedBlocking,
		Description: "host-to-device copies from pinned memory that the host waits for (a synchronize after each copy) in nearly every " +
			"step: .to(device) without non_blocking=True wastes the pinning",
		Severity:  Warning,
		Threshold: 0.9,
		Unit:      "fraction of steps",
		Reads:     []SourceKind{SourceTrace},
		Check:     checkPinnedBlocking,
	})
	register(&Rule{
		ID:          rulePageableH2D,
		Description: "host-to-device copies from pageable (unpinned) memory: staged through a driver buffer and synchronous for the host",
		Severity:    Warning,
		Threshold:   1,
		Unit:        "copies per step",
		Reads:       []SourceKind{SourceTrace},
		Check:       checkPageableH2D,
	})
	register(&Rule{
		ID: ruleIdleGaps,
		Description: "the GPU runs nothing for a large part of the median step, and the trace names why: the host fetching data " +
			"(input starvation), or waiting in a synchronize or a pageable copy every step",
		Severity:  Warning,
		Threshold: 0.3,
		Unit:      "fraction of step time",
		Reads:     []SourceKind{SourceTrace},
		Check:     checkIdleGaps,
	})
	register(&Rule{
		ID: ruleLaunchBound,
		Description: "the GPU runs nothing for a large part of the median step while the host launches work slower than it runs " +
			"(no data loading, sync or pageable copy in the gaps): launch or CPU bound, common for small models",
		Severity:  Info,
		Threshold: 0.3,
		Unit:      "fraction of step time",
		Reads:     []SourceKind{SourceTrace},
		Check:     checkIdleGaps,
	})
	register(&Rule{
		ID: ruleLowMemcpyBW,
		Description: "host<->device copies of 1 MiB or more far slower than the best such copy in the same trace " +
			"(usually pageable against pinned memory)",
		Severity:  Info,
		Threshold: 0.25,
		Unit:      "fraction of the trace's best host<->device bandwidth",
		Reads:     []SourceKind{SourceTrace},
		Check:     checkLowMemcpyBandwidth,
	})
}

// The GPU-timeline analyses of an input (rules/gpu), computed once and
// shared by the timeline rules.

func stepWindows(in *Input) *gpu.Windows {
	return Memo(in, "gpu.windows", func() *gpu.Windows { return gpu.StepWindows(in.Trace) })
}

// hostCopies collects every H2D and D2H copy of the trace with its issuing
// host operator, shared by the copy rules.
//
// Memo holds its lock while computing, so the analyses this one builds on
// are fetched before, not inside, its compute function.
func hostCopies(in *Input) []gpu.HostCopy {
	raw := Memo(in, "gpu.host-copies-raw", func() []gpu.HostCopy { return gpu.FindHostCopies(in.Trace) })
	if len(raw) == 0 {
		return nil
	}
	nest := hostNesting(in)
	frames := pyFrameIndex(in)
	return Memo(in, "gpu.host-copies", func() []gpu.HostCopy {
		return gpu.AttributeCopies(in.Trace, slices.Clone(raw), nest, frames)
	})
}

func hostNesting(in *Input) *gpu.Nesting {
	return Memo(in, "gpu.host-opNesting", func() *gpu.Nesting { return gpu.HostNesting(in.Trace) })
}

func pyFrameIndex(in *Input) *gpu.FrameIndex {
	return Memo(in, "gpu.py-frames", func() *gpu.FrameIndex { return gpu.NewFrameIndex(in.Trace) })
}

func deviceBusy(in *Input) map[int16][]gpu.Interval {
	return Memo(in, "gpu.device-busy", func() map[int16][]gpu.Interval { return gpu.DeviceBusy(in.Trace) })
}

func idleCauseIndex(in *Input) *gpu.IdleIndex {
	copies := hostCopies(in)
	return Memo(in, "gpu.idle-index", func() *gpu.IdleIndex { return gpu.NewIdleIndex(in.Trace, copies) })
}

// siteStats sums copies per issuing site for evidence.
type siteStats struct {
	chain    string
	site     string
	location *site.Location
	copies   int
	bytes    int64
	blocked  int64
}

func groupSites(copies []gpu.HostCopy, keep func(*gpu.HostCopy) bool) []siteStats {
	idx := map[string]int{}
	var out []siteStats
	for i := range copies {
		c := &copies[i]
		if !keep(c) {
			continue
		}
		key := c.Chain
		if c.Location != nil {
			key += "@" + c.Location.String()
		}
		k, ok := idx[key]
		if !ok {
			k = len(out)
			idx[key] = k
			out = append(out, siteStats{chain: c.Chain, site: c.Site, location: c.Location})
		}
		out[k].copies++
		out[k].bytes += c.Bytes
		out[k].blocked += c.Blocked
	}
	slices.SortStableFunc(out, func(a, b siteStats) int {
		if c := cmp.Compare(b.blocked, a.blocked); c != 0 {
			return c
		}
		return cmp.Compare(b.bytes, a.bytes)
	})
	return out
}

func describeSites(sites []siteStats) string {
	parts := make([]string, len(sites))
	for i, s := range sites {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d copies, %s", s.chain, s.copies, memtimeline.FormatBytes(s.bytes))
		if s.blocked > 0 {
			fmt.Fprintf(&b, ", host blocked %s", formatNs(s.blocked))
		}
		if s.location != nil {
			// Kineto names a frame by the line its function starts on.
			fmt.Fprintf(&b, " in %s() (%s)", s.location.Function, s.location)
		}
		parts[i] = b.String()
	}
	return more.Join(parts, maxListedOperators, "; ")
}

func checkSyncCopy(r *Rule, in *Input) []Finding {
	copies := hostCopies(in)
	w := stepWindows(in)
	if len(copies) == 0 || len(w.List) == 0 {
		return nil
	}
	stepHas := make([]bool, len(w.List))
	var n int
	var blocked int64
	var sizes []int64
	isD2H := func(c *gpu.HostCopy) bool { return c.Dir == gpu.D2H && c.Blocking && w.Index(c.Launch) >= 0 }
	for i := range copies {
		c := &copies[i]
		if !isD2H(c) {
			continue
		}
		stepHas[w.Index(c.Launch)] = true
		n++
		blocked += c.Blocked
		sizes = append(sizes, c.Bytes)
	}
	if n == 0 {
		return nil
	}
	steps := 0
	for _, h := range stepHas {
		if h {
			steps++
		}
	}
	frac := float64(steps) / float64(len(w.List))
	if frac < r.Threshold {
		return nil
	}
	var stepTime int64
	for _, s := range w.List {
		stepTime += s.End - s.Start
	}
	sites := groupSites(copies, isD2H)
	top := sites[0]
	slices.Sort(sizes)
	f := Finding{
		Title: fmt.Sprintf("device-to-host copy in %d of %d steps (%s)", steps, len(w.List), top.site),
		Detail: fmt.Sprintf("%d device-to-host copies (median %s) were issued in %d of %d profiled steps; "+
			"each makes the host wait until the GPU has finished everything queued before it. "+
			"The host spent %s per step in the copy and synchronize calls (%.1f%% of step time). Issued by: %s.%s",
			n, memtimeline.FormatBytes(sizes[len(sizes)/2]), steps, len(w.List),
			formatNs(blocked/int64(len(w.List))), 100*float64(blocked)/float64(max(stepTime, 1)),
			describeSites(sites), w.Note()),
		Advice: gpu.LibraryLoopAdvice(copies, isD2H) + "Don't call loss.item(), .cpu(), .tolist() or print(tensor) every step: accumulate metrics " +
			"on the GPU (running_loss += loss.detach()) and read them every N steps; if a value must come " +
			"back, copy it with .to('cpu', non_blocking=True) into pinned memory and read it a step later.",
		Operator: top.site,
		Location: top.location,
		Metrics: map[string]float64{
			"steps_with_copy":               float64(steps),
			"steps":                         float64(len(w.List)),
			"fraction_of_steps":             frac,
			"copies":                        float64(n),
			"median_bytes_per_copy":         float64(sizes[len(sizes)/2]),
			"bytes":                         float64(sumInt64(sizes)),
			"host_blocked_us_per_step":      float64(blocked) / float64(len(w.List)) / 1e3,
			"host_blocked_fraction_of_step": float64(blocked) / float64(max(stepTime, 1)),
		},
	}
	return []Finding{f}
}

func checkPageableH2D(r *Rule, in *Input) []Finding {
	copies := hostCopies(in)
	w := stepWindows(in)
	if len(copies) == 0 || len(w.List) == 0 {
		return nil
	}
	isPageable := func(c *gpu.HostCopy) bool { return c.Dir == gpu.H2D && c.Pageable && w.Index(c.Launch) >= 0 }
	var n int
	var bytes, blocked, largest int64
	for i := range copies {
		c := &copies[i]
		if isPageable(c) {
			n++
			bytes += c.Bytes
			blocked += c.Blocked
			largest = max(largest, c.Bytes)
		}
	}
	steps := float64(len(w.List))
	perStep := float64(n) / steps
	if n == 0 || perStep < r.Threshold {
		return nil
	}
	sites := groupSites(copies, isPageable)
	top := sites[0]
	return []Finding{{
		Title: fmt.Sprintf("%.3g pageable host-to-device %s per step (%s per step)", perStep, fmtutil.Plural(perStep, "copy", "copies"),
			memtimeline.FormatBytes(int64(float64(bytes)/steps))),
		Detail: fmt.Sprintf("%d %s from pageable host memory, %s in all (largest %s), over %d %s. "+
			"The driver stages pageable memory through a pinned buffer, so the copy cannot overlap with "+
			"compute and the host waits for it: %s per step in the copy calls. Issued by: %s.%s",
			n, fmtutil.Plural(float64(n), "copy", "copies"), memtimeline.FormatBytes(bytes), memtimeline.FormatBytes(largest), len(w.List), fmtutil.Plural(float64(len(w.List)), "step", "steps"), formatNs(int64(float64(blocked)/steps)),
			describeSites(sites), w.Note()),
		Advice: "Pin the source: DataLoader(..., pin_memory=True) for batches, tensor.pin_memory() for " +
			"buffers you reuse, then .to(device, non_blocking=True). Create constants and scalars " +
			"directly on the GPU (torch.tensor(v, device='cuda') still copies; torch.full(..., device='cuda') does not).",
		Operator: top.site,
		Location: top.location,
		Metrics: map[string]float64{
			"copies":                   float64(n),
			"copies_per_step":          perStep,
			"bytes":                    float64(bytes),
			"bytes_per_step":           float64(bytes) / steps,
			"largest_copy_bytes":       float64(largest),
			"steps":                    steps,
			"host_blocked_us_per_step": float64(blocked) / steps / 1e3,
		},
	}}
}

// checkPinnedBlocking finds uploads from pinned memory followed by a
// synchronize the host waits in (copy_ without non_blocking=True): the
// pinning is there so the copy can overlap compute, and the sync throws it
// away. Pageable uploads are gpu.pageable-h2d's.
func checkPinnedBlocking(r *Rule, in *Input) []Finding {
	copies := hostCopies(in)
	w := stepWindows(in)
	if len(copies) == 0 || len(w.List) == 0 || w.WholeTrace {
		return nil
	}
	isPinnedBlocking := func(c *gpu.HostCopy) bool {
		return c.Dir == gpu.H2D && !c.Pageable && c.Blocking && c.Waited && w.Index(c.Launch) >= 0
	}
	stepHas := make([]bool, len(w.List))
	var n int
	var bytes, blocked int64
	for i := range copies {
		c := &copies[i]
		if isPinnedBlocking(c) {
			stepHas[w.Index(c.Launch)] = true
			n++
			bytes += c.Bytes
			blocked += c.Blocked
		}
	}
	steps := 0
	for _, h := range stepHas {
		if h {
			steps++
		}
	}
	frac := float64(steps) / float64(len(w.List))
	if n == 0 || frac < r.Threshold {
		return nil
	}
	sites := groupSites(copies, isPinnedBlocking)
	top := sites[0]
	per := float64(len(w.List))
	return []Finding{{
		Title: fmt.Sprintf("%.3g blocking host-to-device %s from pinned memory per step (%s per step)", float64(n)/per, fmtutil.Plural(float64(n)/per, "copy", "copies"),
			memtimeline.FormatBytes(int64(float64(bytes)/per))),
		Detail: fmt.Sprintf("%d copies from pinned (page-locked) memory in %d of %d steps, %s in all, each followed by a synchronize the host waited in: "+
			"%s per step. Pinned memory lets a copy run asynchronously while the GPU computes; copied without non_blocking=True "+
			"the host stops until it lands. Issued by: %s.",
			n, steps, len(w.List), memtimeline.FormatBytes(bytes), formatNs(int64(float64(blocked)/per)), describeSites(sites)),
		Advice: gpu.LibraryLoopAdvice(copies, isPinnedBlocking) + "The source is pinned already (DataLoader(pin_memory=True) or tensor.pin_memory()): copy with " +
			"x.to(device, non_blocking=True) so the upload overlaps compute; the next kernel on the same stream still waits for it.",
		Operator: top.site,
		Location: top.location,
		Metrics: map[string]float64{
			"copies":                   float64(n),
			"copies_per_step":          float64(n) / per,
			"steps_with_copy":          float64(steps),
			"steps":                    per,
			"fraction_of_steps":        frac,
			"bytes":                    float64(bytes),
			"bytes_per_step":           float64(bytes) / per,
			"host_blocked_us_per_step": float64(blocked) / per / 1e3,
		},
	}}
}

func checkLowMemcpyBandwidth(r *Rule, in *Input) []Finding {
	copies := hostCopies(in)
	// PCIe and NVLink-C2C carry both directions at the same rate, so the
	// best large copy of either direction is what this machine can do;
	// comparing within the trace needs no table of link speeds.
	var best float64
	var bestName string
	for i := range copies {
		c := &copies[i]
		if c.Bytes >= minBandwidthBytes && c.Dur > 0 {
			if bw := gpu.GBps(c.Bytes, c.Dur); bw > best {
				best, bestName = bw, in.Trace.Str(in.Trace.DeviceOps[c.Op].Name)
			}
		}
	}
	if best == 0 {
		return nil
	}
	var out []Finding
	for _, dir := range []gpu.Direction{gpu.H2D, gpu.D2H} {
		slow := func(c *gpu.HostCopy) bool {
			return c.Dir == dir && c.Bytes >= minBandwidthBytes && c.Dur > 0 && gpu.GBps(c.Bytes, c.Dur) < r.Threshold*best
		}
		var rates []float64
		var bytes, dur int64
		pageable := 0
		for i := range copies {
			c := &copies[i]
			if slow(c) {
				rates = append(rates, gpu.GBps(c.Bytes, c.Dur))
				bytes += c.Bytes
				dur += c.Dur
				if c.Pageable {
					pageable++
				}
			}
		}
		if len(rates) == 0 {
			continue
		}
		slices.Sort(rates)
		median := rates[len(rates)/2]
		sites := groupSites(copies, slow)
		advice := "Copy from pinned memory (tensor.pin_memory(), DataLoader(pin_memory=True)) with non_blocking=True; " +
			"for device-to-host, copy into a preallocated pinned tensor (dst.copy_(src, non_blocking=True))."
		if pageable < len(rates) {
			advice += " Pinned copies this slow point at a shared or narrow link (other copies at the same time, a x8 slot, a PCIe switch)."
		}
		out = append(out, Finding{
			Title: fmt.Sprintf("%d %s %s at %.1f GB/s, %.0f%% of the trace's best %.1f GB/s", len(rates), dir,
				fmtutil.Plural(float64(len(rates)), "copy", "copies"), median, 100*median/best, best),
			Detail: fmt.Sprintf("%d %s copies of at least %s moved %s at a median %.2f GB/s (%d from pageable memory), "+
				"under %.0f%% of the best host<->device copy in this trace (%s, %.2f GB/s); they took %s of device time. Issued by: %s.",
				len(rates), dir, memtimeline.FormatBytes(minBandwidthBytes), memtimeline.FormatBytes(bytes), median, pageable,
				100*r.Threshold, bestName, best, formatNs(dur), describeSites(sites)),
			Advice:   advice,
			Operator: sites[0].site,
			Location: sites[0].location,
			Metrics: map[string]float64{
				"copies":           float64(len(rates)),
				"pageable_copies":  float64(pageable),
				"bytes":            float64(bytes),
				"median_gbps":      median,
				"best_gbps":        best,
				"fraction_of_best": median / best,
				"device_time_us":   float64(dur) / 1e3,
			},
		})
	}
	return out
}

func checkIdleGaps(r *Rule, in *Input) []Finding {
	w := stepWindows(in)
	busy := deviceBusy(in)
	if len(w.List) == 0 || len(busy) == 0 {
		return nil
	}
	causes := idleCauseIndex(in)
	devices := make([]int16, 0, len(busy))
	for d := range busy {
		devices = append(devices, d)
	}
	slices.Sort(devices)
	var out []Finding
	for _, dev := range devices {
		fracs := make([]float64, len(w.List))
		namedShares := make([]float64, len(w.List))
		var worst gpu.StepIdle
		worstStep := 0
		var idleTotal, stepTotal int64
		var charged gpu.Causes
		gapCount := 0
		for i, s := range w.List {
			si := gpu.IdleInWindow(busy[dev], s)
			fracs[i] = si.Fraction
			c := gpu.CausesInWindow(busy[dev], s, causes)
			charged.Data += c.Data
			charged.Sync += c.Sync
			charged.Pageable += c.Pageable
			namedShares[i] = float64(c.Named()) / float64(max(si.Idle, 1))
			idleTotal += si.Idle
			gapCount += si.Gaps
			stepTotal += s.End - s.Start
			if si.Gap.End-si.Gap.Start > worst.Gap.End-worst.Gap.Start {
				worst, worstStep = si, i
			}
		}
		sorted := slices.Clone(fracs)
		slices.Sort(sorted)
		median := sorted[len(sorted)/2]
		if len(sorted)%2 == 0 {
			median = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
		}
		if median <= r.Threshold {
			continue
		}
		// The largest explained cause is named when it accounts for a
		// real share of the median step's idle time (minNamedIdleShare),
		// with that share said; otherwise the host is simply slower than
		// the device (info, under gpu.launch-bound). A cause under half
		// the idle time is still the one to fix first: a slow DataLoader
		// taking 47% of the idle time is not "launch bound".
		namedShare := medianOf(namedShares)
		named := namedShare >= minNamedIdleShare
		if named != (r.ID == ruleIdleGaps) {
			continue
		}
		gapLen := worst.Gap.End - worst.Gap.Start
		doing := gpu.HostDuring(in.Trace, worst.Gap)
		var loc *site.Location
		if s := w.List[worstStep]; gapLen > 0 {
			loc = pyFrameIndex(in).UserLocation(s.Thread, worst.Gap.Start+gapLen/2)
		}
		stepLabel := "the trace"
		if !w.WholeTrace {
			stepLabel = fmt.Sprintf("ProfilerStep#%d", w.List[worstStep].Number)
		}
		hostText := "no host operator was recorded during it"
		op := ""
		if len(doing) > 0 {
			hostText = "the host was in " + describeHostOps(doing)
			op = doing[0].Name
		}
		// One long gap is a stall (data loading, a sync); idle time spread
		// over many short gaps means the host launches kernels slower than
		// the GPU runs them.
		meanGap := idleTotal / int64(max(gapCount, 1))
		shape := fmt.Sprintf("The idle time is spread over %d gaps (mean %s): the GPU waits for the host to launch work (CPU or launch bound).", gapCount, formatNs(meanGap))
		advice := "Many short gaps mean the host cannot launch kernels as fast as the GPU runs them: " +
			"use larger batches, fuse small ops with torch.compile (mode=\"reduce-overhead\" adds CUDA graphs), " +
			"and remove per-step host syncs (.item(), .cpu())."
		if 2*gapLen >= worst.Idle {
			shape = "Most of that step's idle time is one stall."
			advice = "Find what the host does in the gap (above). If it is data loading: DataLoader(num_workers>0, " +
				"pin_memory=True, prefetch_factor=2+, persistent_workers=True), move preprocessing to the GPU, or prefetch " +
				"the next batch on a side stream; if it is a host sync (.item(), .cpu()), move it out of the step."
		}
		title := fmt.Sprintf("GPU %d idle %.0f%% of the median step", dev, 100*median)
		if named {
			cause, why, what := idleCauseText(charged, stepTotal)
			title += ": " + cause
			if namedShare < 0.5 {
				title += fmt.Sprintf(" (the largest explained cause: %.0f%% of the idle time; the rest has no recorded cause)", 100*namedShare)
			}
			shape += " " + why
			advice = what
		} else if 2*gapLen >= worst.Idle && op != "" {
			title += ": one stall per step while the host ran " + op
		} else {
			title += ": the host launches work slower than the GPU runs it"
		}
		out = append(out, Finding{
			Title: title,
			Detail: fmt.Sprintf("On GPU %d no kernel, copy or memset ran for %.0f%% of the median step (max %.0f%%, %.0f%% of all %d %s together). %s "+
				"The largest gap, %s in %s, began %s into the step; %s.%s",
				dev, 100*median, 100*sorted[len(sorted)-1], 100*float64(idleTotal)/float64(max(stepTotal, 1)), len(w.List), fmtutil.Plural(float64(len(w.List)), "step", "steps"), shape,
				formatNs(gapLen), stepLabel, formatNs(worst.Gap.Start-w.List[worstStep].Start), hostText, w.Note()),
			Advice:   advice,
			Operator: op,
			Location: loc,
			Metrics: map[string]float64{
				"device":                         float64(dev),
				"steps":                          float64(len(w.List)),
				"median_idle_fraction":           median,
				"max_idle_fraction":              sorted[len(sorted)-1],
				"total_idle_fraction":            float64(idleTotal) / float64(max(stepTotal, 1)),
				"largest_gap_us":                 float64(gapLen) / 1e3,
				"largest_gap_step":               float64(w.List[worstStep].Number),
				"largest_gap_offset_us":          float64(worst.Gap.Start-w.List[worstStep].Start) / 1e3,
				"gaps":                           float64(gapCount),
				"mean_gap_us":                    float64(meanGap) / 1e3,
				"largest_gap_share_of_step_idle": float64(gapLen) / float64(max(worst.Idle, 1)),
				"data_wait_fraction":             float64(charged.Data) / float64(max(stepTotal, 1)),
				"sync_wait_fraction":             float64(charged.Sync) / float64(max(stepTotal, 1)),
				"pageable_wait_fraction":         float64(charged.Pageable) / float64(max(stepTotal, 1)),
				"median_named_share_of_idle":     medianOf(namedShares),
			},
		})
	}
	return out
}

func describeHostOps(l []gpu.HostActivity) string {
	parts := make([]string, len(l))
	for i, a := range l {
		parts[i] = fmt.Sprintf("%s (%s)", a.Name, formatNs(a.Overlap))
	}
	return more.Join(parts, maxListedOperators, ", ")
}

func sumInt64(l []int64) int64 {
	var s int64
	for _, v := range l {
		s += v
	}
	return s
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// idleCauseText names the largest cause of the charged idle time, says what it is
// in numbers of step time and what to do.
// minNamedIdleShare is the share of a step's idle time its explained
// causes (data loading, a host sync, pageable copies) must reach for the
// largest to be named.
const minNamedIdleShare = 0.25

func idleCauseText(c gpu.Causes, stepTotal int64) (cause, why, advice string) {
	pct := func(n int64) float64 { return 100 * float64(n) / float64(max(stepTotal, 1)) }
	switch {
	case c.Data >= c.Sync && c.Data >= c.Pageable:
		return "input starvation",
			fmt.Sprintf("The host was fetching the next batch (DataLoader) during idle time making %.0f%% of all step time: the GPU waits for data.", pct(c.Data)),
			"Load data ahead of the GPU: DataLoader(num_workers>0, pin_memory=True, prefetch_factor=2+, persistent_workers=True), " +
				"move preprocessing to the GPU, or prefetch the next batch on a side stream."
	case c.Sync >= c.Pageable:
		return "a host sync every step",
			fmt.Sprintf("Gaps opening while the host waited in a synchronize (torch.cuda.synchronize(), .item(), .cpu(), a synchronous copy) make %.0f%% of all step time: "+
				"each sync drains the GPU's queue, which stays empty until the host launches again.", pct(c.Sync)),
			"Remove per-step host syncs: accumulate metrics on the GPU and read them every N steps; copy results with " +
				"non_blocking=True into pinned memory; drop torch.cuda.synchronize() from the loop."
	default:
		return "pageable host-to-device copies",
			fmt.Sprintf("Gaps opening while the host copied from pageable memory make %.0f%% of all step time: the driver stages those copies synchronously.", pct(c.Pageable)),
			"Pin the source (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with .to(device, non_blocking=True)."
	}
}

// formatNs prints nanoseconds as every duration prints
// (memtimeline.FormatDuration).
func formatNs(ns int64) string { return memtimeline.FormatDuration(time.Duration(ns)) }
