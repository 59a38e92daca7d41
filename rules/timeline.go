package rules

// GPU-timeline detectors: what Nsight Systems users look for by eye in a
// profile (a blocking device-to-host copy every step, pageable uploads, an
// idle GPU, slow copies), computed from the Kineto trace's device lanes.

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

const (
	ruleSyncCopy        = "gpu.sync-copy-every-step"
	rulePageableH2D     = "gpu.pageable-h2d"
	rulePinnedBlocking  = "gpu.pinned-h2d-blocking"
	ruleIdleGaps        = "gpu.idle-gaps"
	ruleLowMemcpyBW     = "gpu.low-memcpy-bandwidth"
	minBandwidthBytes   = 1 << 20 // copies smaller than this are latency-bound, not bandwidth-bound
	maxListedOperators  = 3
	wholeTraceStepLabel = -1
)

func init() {
	Register(&Rule{
		ID:          ruleSyncCopy,
		Description: "a device-to-host copy (loss.item(), .cpu(), print(tensor)) in nearly every profiler step: the host waits for the GPU each step",
		Severity:    Warning,
		Threshold:   0.9,
		Unit:        "fraction of steps",
		Check:       traceOnly(checkSyncCopy),
	})
	Register(&Rule{
		ID: rulePinnedBlocking,
		Description: "host-to-device copies from pinned memory that the host waits for (a synchronize after each copy) in nearly every " +
			"step: .to(device) without non_blocking=True wastes the pinning",
		Severity:  Warning,
		Threshold: 0.9,
		Unit:      "fraction of steps",
		Check:     traceOnly(checkPinnedBlocking),
	})
	Register(&Rule{
		ID:          rulePageableH2D,
		Description: "host-to-device copies from pageable (unpinned) memory: staged through a driver buffer and synchronous for the host",
		Severity:    Warning,
		Threshold:   1,
		Unit:        "copies per step",
		Check:       traceOnly(checkPageableH2D),
	})
	Register(&Rule{
		ID: ruleIdleGaps,
		Description: "the GPU runs nothing for a large part of the median step, and the trace names why: the host fetching data " +
			"(input starvation), or waiting in a synchronize or a pageable copy every step",
		Severity:  Warning,
		Threshold: 0.3,
		Unit:      "fraction of step time",
		Check:     traceOnly(checkIdleGaps),
	})
	Register(&Rule{
		ID: ruleLaunchBound,
		Description: "the GPU runs nothing for a large part of the median step while the host launches work slower than it runs " +
			"(no data loading, sync or pageable copy in the gaps): launch or CPU bound, common for small models",
		Severity:  Info,
		Threshold: 0.3,
		Unit:      "fraction of step time",
		Check:     traceOnly(checkIdleGaps),
	})
	Register(&Rule{
		ID: ruleLowMemcpyBW,
		Description: "host<->device copies of 1 MiB or more far slower than the best such copy in the same trace " +
			"(usually pageable against pinned memory)",
		Severity:  Info,
		Threshold: 0.25,
		Unit:      "fraction of the trace's best host<->device bandwidth",
		Check:     traceOnly(checkLowMemcpyBandwidth),
	})
}

// gpuWindow is one ProfilerStep on the host, or the whole trace when the
// profiler ran without a schedule.
type gpuWindow struct {
	Number     int64 // step number, wholeTraceStepLabel for the whole trace
	Start, End int64 // ns
	Thread     chrometrace.ThreadID
}

type gpuWindows struct {
	list       []gpuWindow // sorted by Start, disjoint
	wholeTrace bool        // no ProfilerStep: one window spanning every event
}

// index returns the window holding ts, or -1.
func (w *gpuWindows) index(ts int64) int {
	i, _ := slices.BinarySearchFunc(w.list, ts, func(x gpuWindow, t int64) int {
		if x.Start > t {
			return 1
		}
		return -1
	})
	// i is the first window starting after ts; the one before may hold it.
	if i > 0 && ts <= w.list[i-1].End {
		return i - 1
	}
	return -1
}

func (w *gpuWindows) note() string {
	if w.wholeTrace {
		return " The trace has no ProfilerStep annotations (profiler without a schedule), so the whole trace counts as one step."
	}
	return ""
}

func stepWindows(in *Input) *gpuWindows {
	return Memo(in, "gpu.windows", func() *gpuWindows {
		t := in.Trace
		w := &gpuWindows{}
		seen := map[int64]bool{}
		for _, s := range t.Steps {
			if seen[s.Number] || s.Dur <= 0 {
				continue
			}
			seen[s.Number] = true
			w.list = append(w.list, gpuWindow{Number: s.Number, Start: s.Start, End: s.End(), Thread: s.Thread})
		}
		if len(w.list) > 0 {
			slices.SortFunc(w.list, func(a, b gpuWindow) int { return cmp.Compare(a.Start, b.Start) })
			return w
		}
		w.wholeTrace = true
		lo, hi, any := int64(0), int64(0), false
		span := func(s, e int64) {
			if !any || s < lo {
				lo = s
			}
			if !any || e > hi {
				hi = e
			}
			any = true
		}
		for i := range t.HostOps {
			span(t.HostOps[i].Start, t.HostOps[i].End())
		}
		for i := range t.DeviceOps {
			span(t.DeviceOps[i].Start, t.DeviceOps[i].End())
		}
		if any && hi > lo {
			w.list = []gpuWindow{{Number: wholeTraceStepLabel, Start: lo, End: hi, Thread: t.MainThread()}}
		}
		return w
	})
}

// copyDirection classifies a gpu_memcpy by its name, which Kineto writes as
// "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)"...
type copyDirection uint8

const (
	copyOther copyDirection = iota
	copyH2D
	copyD2H
)

func (d copyDirection) String() string {
	switch d {
	case copyH2D:
		return "host-to-device"
	case copyD2H:
		return "device-to-host"
	}
	return "other"
}

func classifyCopy(name string) (dir copyDirection, pageable bool) {
	switch {
	case strings.HasPrefix(name, "Memcpy HtoD"):
		dir = copyH2D
	case strings.HasPrefix(name, "Memcpy DtoH"):
		dir = copyD2H
	default:
		return copyOther, false
	}
	return dir, strings.Contains(name, "Pageable")
}

// hostCopy is one host<->device copy with what the host did to issue it.
type hostCopy struct {
	op       int // index in Trace.DeviceOps
	dir      copyDirection
	pageable bool
	bytes    int64
	dur      int64 // device time, ns
	// issuer is the cpu_op with the copy's External id (aten::copy_,
	// aten::_local_scalar_dense), -1 when the trace has none.
	issuer int
	// site is the outermost cpu_op enclosing the issuer (aten::item,
	// aten::to), the operator the user called.
	site string
	// chain is "outer > ... > issuer".
	chain string
	// launch is when the host asked for the copy (its cuda_runtime call),
	// which decides its step: the device may run it later.
	launch int64
	// blocked is the host time in the runtime calls tied to the copy
	// (cudaMemcpyAsync, cudaStreamSynchronize): time the host waited.
	blocked int64
	// blocking: the host waited for this copy (a synchronize call, a
	// synchronous cudaMemcpy, or pageable memory, which the driver copies
	// synchronously), or the trace has no runtime calls to tell.
	blocking bool
	// waited: a synchronize call carries the copy's External id (the host
	// waited for this copy itself, not only for a synchronous API).
	waited   bool
	location *site.Location
	// libraryAdvice names the switch of the known library loop that issued
	// the copy (librarySyncSwitches), or is "".
	libraryAdvice string
}

// hostCopies collects every H2D and D2H copy of the trace with its issuing
// host operator, shared by the copy rules.
//
// Memo holds its lock while computing, so the analyses this one builds on
// are fetched before, not inside, its compute function.
func hostCopies(in *Input) []hostCopy {
	raw := Memo(in, "gpu.host-copies-raw", func() []hostCopy { return findHostCopies(in.Trace) })
	if len(raw) == 0 {
		return nil
	}
	nest := hostNesting(in)
	frames := pyFrameIndex(in)
	return Memo(in, "gpu.host-copies", func() []hostCopy {
		return attributeCopies(in.Trace, slices.Clone(raw), nest, frames)
	})
}

// findHostCopies pairs each H2D/D2H copy with the host ops of its External id.
func findHostCopies(t *chrometrace.Trace) []hostCopy {
	var copies []hostCopy
	want := map[int64][]int{} // External id -> copies
	for i := range t.DeviceOps {
		d := &t.DeviceOps[i]
		if d.Cat != chrometrace.CatGPUMemcpy {
			continue
		}
		dir, pageable := classifyCopy(t.Str(d.Name))
		if dir == copyOther {
			continue
		}
		copies = append(copies, hostCopy{op: i, dir: dir, pageable: pageable, bytes: d.Bytes, dur: d.Dur, issuer: -1, launch: d.Start})
		if d.ExternalID != 0 {
			want[d.ExternalID] = append(want[d.ExternalID], len(copies)-1)
		}
	}
	if len(copies) == 0 {
		return nil
	}
	// One pass over the host ops finds the issuing cpu_op and the
	// runtime calls of each copy: Kineto gives the launching cpu_op,
	// its cuda_runtime calls and the device op the same External id.
	launchSeen := make([]bool, len(copies))
	runtimeSeen := make([]bool, len(copies))
	for i := range t.HostOps {
		h := &t.HostOps[i]
		ids, ok := want[h.ExternalID]
		if h.ExternalID == 0 || !ok {
			continue
		}
		switch h.Cat {
		case chrometrace.CatCPUOp:
			for _, c := range ids {
				// The innermost op wins when several share an id.
				if copies[c].issuer < 0 || t.HostOps[copies[c].issuer].Dur > h.Dur {
					copies[c].issuer = i
				}
			}
		case chrometrace.CatCUDARuntime:
			for _, c := range ids {
				runtimeSeen[c] = true
			}
			name := t.Str(h.Name)
			isCopy := strings.HasPrefix(name, "cudaMemcpy")
			if !isCopy && !strings.Contains(name, "Synchronize") {
				continue
			}
			// Several copies under one op (rare) share the wait; count
			// it once, on the first.
			copies[ids[0]].blocked += h.Dur
			if waits := !isCopy || !strings.Contains(name, "Async"); waits {
				for _, c := range ids {
					copies[c].blocking = true
					copies[c].waited = copies[c].waited || !isCopy
				}
			}
			if isCopy {
				for _, c := range ids {
					if !launchSeen[c] {
						copies[c].launch, launchSeen[c] = h.Start, true
					}
				}
			}
		}
	}
	for i := range copies {
		if !launchSeen[i] && copies[i].issuer >= 0 {
			copies[i].launch = t.HostOps[copies[i].issuer].Start
		}
		if copies[i].pageable || !runtimeSeen[i] {
			copies[i].blocking = true
		}
	}
	return copies
}

// attributeCopies names the operator and Python line behind each copy.
func attributeCopies(t *chrometrace.Trace, copies []hostCopy, nest *opNesting, frames *pyFrameLookup) []hostCopy {
	for i := range copies {
		c := &copies[i]
		if c.issuer < 0 {
			c.site, c.chain = "(no host operator)", "(no host operator)"
			continue
		}
		issuer := &t.HostOps[c.issuer]
		names := []string{t.Str(issuer.Name)}
		for p := nest.parentOf(c.issuer); p >= 0 && t.HostOps[p].Cat == chrometrace.CatCPUOp; p = nest.parentOf(p) {
			names = append(names, t.Str(t.HostOps[p].Name))
		}
		slices.Reverse(names)
		c.site, c.chain = names[0], strings.Join(names, " > ")
		c.location = frames.userLocation(issuer.Thread, issuer.Start)
		c.libraryAdvice = frames.librarySwitch(issuer.Thread, issuer.Start, c.site)
	}
	return copies
}

// opNesting gives each cpu_op and user_annotation its enclosing op on the
// same thread.
type opNesting struct {
	parent []int32 // by HostOps index; -1 at a root or for other categories
}

func (n *opNesting) parentOf(i int) int { return int(n.parent[i]) }

func hostNesting(in *Input) *opNesting {
	return Memo(in, "gpu.host-opNesting", func() *opNesting {
		h := in.Trace.HostOps
		var idx []int
		for i := range h {
			if h[i].Cat == chrometrace.CatCPUOp || h[i].Cat == chrometrace.CatUserAnnotation {
				idx = append(idx, i)
			}
		}
		slices.SortFunc(idx, func(a, b int) int {
			if c := cmp.Compare(h[a].Thread, h[b].Thread); c != 0 {
				return c
			}
			if c := cmp.Compare(h[a].Start, h[b].Start); c != 0 {
				return c
			}
			return cmp.Compare(h[b].End(), h[a].End())
		})
		n := &opNesting{parent: make([]int32, len(h))}
		for i := range n.parent {
			n.parent[i] = -1
		}
		var stack []int
		for k, i := range idx {
			if k > 0 && h[idx[k-1]].Thread != h[i].Thread {
				stack = stack[:0]
			}
			for len(stack) > 0 {
				top := &h[stack[len(stack)-1]]
				if h[i].Start >= top.End() || h[i].End() > top.End() {
					stack = stack[:len(stack)-1]
					continue
				}
				n.parent[i] = int32(stack[len(stack)-1])
				break
			}
			stack = append(stack, i)
		}
		return n
	})
}

// pyFrameLookup finds the innermost user Python frame at a time on a thread,
// from python_function events (with_stack=True).
type pyFrameLookup struct {
	t        *chrometrace.Trace
	byThread map[chrometrace.ThreadID][]int // PyFrames indices by start
	byID     map[int32]int
}

func pyFrameIndex(in *Input) *pyFrameLookup {
	return Memo(in, "gpu.py-frames", func() *pyFrameLookup {
		t := in.Trace
		fi := &pyFrameLookup{t: t, byThread: map[chrometrace.ThreadID][]int{}, byID: make(map[int32]int, len(t.PyFrames))}
		for i := range t.PyFrames {
			f := &t.PyFrames[i]
			fi.byThread[f.Thread] = append(fi.byThread[f.Thread], i)
			if f.ID >= 0 {
				fi.byID[f.ID] = i
			}
		}
		for _, l := range fi.byThread {
			slices.SortFunc(l, func(a, b int) int { return cmp.Compare(t.PyFrames[a].Start, t.PyFrames[b].Start) })
		}
		return fi
	})
}

// pyFrameName is "file.py(123): func" as the profiler writes frames.
var pyFrameName = regexp.MustCompile(`^(.+)\((\d+)\): (.+)$`)

// libraryFrame reports frames of torch, installed packages or the
// standard library: the one user-code test (chrometrace.IsLibraryFile).
func libraryFrame(file string) bool { return chrometrace.IsLibraryFile(file) }

func (fi *pyFrameLookup) userLocation(th chrometrace.ThreadID, ts int64) *site.Location {
	var loc *site.Location
	fi.enclosing(th, ts, func(file string, line int, function string) bool {
		if libraryFrame(file) {
			return true
		}
		loc = &site.Location{File: file, Line: line, Function: function}
		return false
	})
	return loc
}

// enclosing calls visit with each Python frame enclosing ts on thread th,
// innermost first, until visit returns false.
func (fi *pyFrameLookup) enclosing(th chrometrace.ThreadID, ts int64, visit func(file string, line int, function string) bool) {
	l := fi.byThread[th]
	if len(l) == 0 {
		return
	}
	frames := fi.t.PyFrames
	k, _ := slices.BinarySearchFunc(l, ts, func(i int, t int64) int {
		if frames[i].Start > t {
			return 1
		}
		return -1
	})
	if k == 0 {
		return
	}
	// Frames nest, so every frame enclosing ts is an ancestor of the last
	// frame that started at or before ts.
	for cur, hops := l[k-1], 0; cur >= 0 && hops < 1000; hops++ {
		f := &frames[cur]
		if f.Start <= ts && ts <= f.End() {
			if m := pyFrameName.FindStringSubmatch(fi.t.Str(f.Name)); m != nil {
				line, _ := strconv.Atoi(m[2])
				if !visit(m[1], line, m[3]) {
					return
				}
			}
		}
		p, ok := fi.byID[f.ParentID]
		if f.ParentID < 0 || !ok {
			return
		}
		cur = p
	}
}

// librarySwitch is the advice of the known library loop (librarySyncSwitches)
// whose frames enclose a copy issued by operator site at ts, or "".
func (fi *pyFrameLookup) librarySwitch(th chrometrace.ThreadID, ts int64, site string) string {
	var files []string
	fi.enclosing(th, ts, func(file string, _ int, _ string) bool {
		files = append(files, file)
		return len(files) < 1000
	})
	encloses := func(suffix string) bool {
		if suffix == "" {
			return true
		}
		for _, f := range files {
			if f == suffix || strings.HasSuffix(f, "/"+suffix) {
				return true
			}
		}
		return false
	}
	if len(files) == 0 {
		return ""
	}
	for _, sw := range librarySyncSwitches {
		inner := files[0] == sw.innermost || strings.HasSuffix(files[0], "/"+sw.innermost)
		if site == sw.firstOp && inner && encloses(sw.within) {
			return sw.advice
		}
	}
	return ""
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

func groupSites(copies []hostCopy, keep func(*hostCopy) bool) []siteStats {
	idx := map[string]int{}
	var out []siteStats
	for i := range copies {
		c := &copies[i]
		if !keep(c) {
			continue
		}
		key := c.chain
		if c.location != nil {
			key += "@" + c.location.String()
		}
		k, ok := idx[key]
		if !ok {
			k = len(out)
			idx[key] = k
			out = append(out, siteStats{chain: c.chain, site: c.site, location: c.location})
		}
		out[k].copies++
		out[k].bytes += c.bytes
		out[k].blocked += c.blocked
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
	var b strings.Builder
	for i, s := range sites {
		if i == maxListedOperators {
			fmt.Fprintf(&b, "; and %d more", len(sites)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %d copies, %s", s.chain, s.copies, memtimeline.FormatBytes(s.bytes))
		if s.blocked > 0 {
			fmt.Fprintf(&b, ", host blocked %s", fmtutil.FormatNs(s.blocked))
		}
		if s.location != nil {
			// Kineto names a frame by the line its function starts on.
			fmt.Fprintf(&b, " in %s() (%s)", s.location.Function, s.location)
		}
	}
	return b.String()
}

// librarySyncSwitches are per-step host syncs made by a known library's own
// training loop, with the switch that turns them off: matched by the issuing
// frame's file and the operator chain's first operator. Listed only where the
// library's code was read and the switch is certain.
var librarySyncSwitches = []struct {
	// innermost: the innermost Python frame around the copy (the library
	// line that issues it); within: another enclosing frame, when the
	// switch belongs to the loop around it ("" for any).
	innermost, within, firstOp, advice string
}{
	// Trainer's loop runs `torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step)`
	// after every micro-batch: two aten::is_nonzero reads of the loss, made
	// in trainer.py itself (a model's own syncs run in its modeling files).
	{"transformers/trainer.py", "", "aten::is_nonzero", "transformers.Trainer reads every micro-batch's loss " +
		"back to check it for NaN/Inf (TrainingArguments(logging_nan_inf_filter=True), the default): pass " +
		"logging_nan_inf_filter=False to TrainingArguments to drop that sync. "},
	// Accelerate's prepared DataLoader moves each batch with send_to_device(...,
	// non_blocking=DataLoaderConfiguration.non_blocking), False by default;
	// Trainer passes TrainingArguments.accelerator_config's non_blocking.
	{"accelerate/utils/operations.py", "transformers/trainer.py", "aten::to", "transformers.Trainer's DataLoader " +
		"(Accelerate) copies each pinned batch with non_blocking=False: pass " +
		"accelerator_config={\"non_blocking\": True} to TrainingArguments (dataloader_pin_memory is on by default). "},
	{"accelerate/utils/operations.py", "accelerate/data_loader.py", "aten::to", "Accelerate's prepared DataLoader " +
		"copies each pinned batch with non_blocking=False: create the Accelerator with " +
		"dataloader_config=DataLoaderConfiguration(non_blocking=True). "},
}

// libraryLoopAdvice is the switch advice of every known library loop that
// issued one of the copies keep selects, or "".
func libraryLoopAdvice(copies []hostCopy, keep func(*hostCopy) bool) string {
	var b strings.Builder
	for _, sw := range librarySyncSwitches {
		for i := range copies {
			if c := &copies[i]; keep(c) && c.libraryAdvice == sw.advice {
				b.WriteString(sw.advice)
				break
			}
		}
	}
	return b.String()
}

func checkSyncCopy(r *Rule, in *Input) []Finding {
	copies := hostCopies(in)
	w := stepWindows(in)
	if len(copies) == 0 || len(w.list) == 0 {
		return nil
	}
	stepHas := make([]bool, len(w.list))
	var n int
	var blocked int64
	var sizes []int64
	isD2H := func(c *hostCopy) bool { return c.dir == copyD2H && c.blocking && w.index(c.launch) >= 0 }
	for i := range copies {
		c := &copies[i]
		if !isD2H(c) {
			continue
		}
		stepHas[w.index(c.launch)] = true
		n++
		blocked += c.blocked
		sizes = append(sizes, c.bytes)
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
	frac := float64(steps) / float64(len(w.list))
	if frac < r.Threshold {
		return nil
	}
	var stepTime int64
	for _, s := range w.list {
		stepTime += s.End - s.Start
	}
	sites := groupSites(copies, isD2H)
	top := sites[0]
	slices.Sort(sizes)
	f := Finding{
		Title: fmt.Sprintf("device-to-host copy in %d of %d steps (%s)", steps, len(w.list), top.site),
		Detail: fmt.Sprintf("%d device-to-host copies (median %s) were issued in %d of %d profiled steps; "+
			"each makes the host wait until the GPU has finished everything queued before it. "+
			"The host spent %s per step in the copy and synchronize calls (%.1f%% of step time). Issued by: %s.%s",
			n, memtimeline.FormatBytes(sizes[len(sizes)/2]), steps, len(w.list),
			fmtutil.FormatNs(blocked/int64(len(w.list))), 100*float64(blocked)/float64(max(stepTime, 1)),
			describeSites(sites), w.note()),
		Advice: libraryLoopAdvice(copies, isD2H) + "Don't call loss.item(), .cpu(), .tolist() or print(tensor) every step: accumulate metrics " +
			"on the GPU (running_loss += loss.detach()) and read them every N steps; if a value must come " +
			"back, copy it with .to('cpu', non_blocking=True) into pinned memory and read it a step later.",
		Operator: top.site,
		Location: top.location,
		Metrics: map[string]float64{
			"steps_with_copy":               float64(steps),
			"steps":                         float64(len(w.list)),
			"fraction_of_steps":             frac,
			"copies":                        float64(n),
			"median_bytes_per_copy":         float64(sizes[len(sizes)/2]),
			"bytes":                         float64(sumInt64(sizes)),
			"host_blocked_us_per_step":      float64(blocked) / float64(len(w.list)) / 1e3,
			"host_blocked_fraction_of_step": float64(blocked) / float64(max(stepTime, 1)),
		},
	}
	return []Finding{f}
}

func checkPageableH2D(r *Rule, in *Input) []Finding {
	copies := hostCopies(in)
	w := stepWindows(in)
	if len(copies) == 0 || len(w.list) == 0 {
		return nil
	}
	isPageable := func(c *hostCopy) bool { return c.dir == copyH2D && c.pageable && w.index(c.launch) >= 0 }
	var n int
	var bytes, blocked, largest int64
	for i := range copies {
		c := &copies[i]
		if isPageable(c) {
			n++
			bytes += c.bytes
			blocked += c.blocked
			largest = max(largest, c.bytes)
		}
	}
	steps := float64(len(w.list))
	perStep := float64(n) / steps
	if n == 0 || perStep < r.Threshold {
		return nil
	}
	sites := groupSites(copies, isPageable)
	top := sites[0]
	return []Finding{{
		Title: fmt.Sprintf("%.3g pageable host-to-device %s per step (%s per step)", perStep, fmtutil.Plural(perStep, "copy", "copies"),
			memtimeline.FormatBytes(int64(float64(bytes)/steps))),
		Detail: fmt.Sprintf("%d copies from pageable host memory, %s in all (largest %s), over %d step(s). "+
			"The driver stages pageable memory through a pinned buffer, so the copy cannot overlap with "+
			"compute and the host waits for it: %s per step in the copy calls. Issued by: %s.%s",
			n, memtimeline.FormatBytes(bytes), memtimeline.FormatBytes(largest), len(w.list), fmtutil.FormatNs(int64(float64(blocked)/steps)),
			describeSites(sites), w.note()),
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
	if len(copies) == 0 || len(w.list) == 0 || w.wholeTrace {
		return nil
	}
	isPinnedBlocking := func(c *hostCopy) bool {
		return c.dir == copyH2D && !c.pageable && c.blocking && c.waited && w.index(c.launch) >= 0
	}
	stepHas := make([]bool, len(w.list))
	var n int
	var bytes, blocked int64
	for i := range copies {
		c := &copies[i]
		if isPinnedBlocking(c) {
			stepHas[w.index(c.launch)] = true
			n++
			bytes += c.bytes
			blocked += c.blocked
		}
	}
	steps := 0
	for _, h := range stepHas {
		if h {
			steps++
		}
	}
	frac := float64(steps) / float64(len(w.list))
	if n == 0 || frac < r.Threshold {
		return nil
	}
	sites := groupSites(copies, isPinnedBlocking)
	top := sites[0]
	per := float64(len(w.list))
	return []Finding{{
		Title: fmt.Sprintf("%.3g blocking host-to-device %s from pinned memory per step (%s per step)", float64(n)/per, fmtutil.Plural(float64(n)/per, "copy", "copies"),
			memtimeline.FormatBytes(int64(float64(bytes)/per))),
		Detail: fmt.Sprintf("%d copies from pinned (page-locked) memory in %d of %d steps, %s in all, each followed by a synchronize the host waited in: "+
			"%s per step. Pinned memory lets a copy run asynchronously while the GPU computes; copied without non_blocking=True "+
			"the host stops until it lands. Issued by: %s.",
			n, steps, len(w.list), memtimeline.FormatBytes(bytes), fmtutil.FormatNs(int64(float64(blocked)/per)), describeSites(sites)),
		Advice: libraryLoopAdvice(copies, isPinnedBlocking) + "The source is pinned already (DataLoader(pin_memory=True) or tensor.pin_memory()): copy with " +
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
		if c.bytes >= minBandwidthBytes && c.dur > 0 {
			if bw := gbps(c.bytes, c.dur); bw > best {
				best, bestName = bw, in.Trace.Str(in.Trace.DeviceOps[c.op].Name)
			}
		}
	}
	if best == 0 {
		return nil
	}
	var out []Finding
	for _, dir := range []copyDirection{copyH2D, copyD2H} {
		slow := func(c *hostCopy) bool {
			return c.dir == dir && c.bytes >= minBandwidthBytes && c.dur > 0 && gbps(c.bytes, c.dur) < r.Threshold*best
		}
		var rates []float64
		var bytes, dur int64
		pageable := 0
		for i := range copies {
			c := &copies[i]
			if slow(c) {
				rates = append(rates, gbps(c.bytes, c.dur))
				bytes += c.bytes
				dur += c.dur
				if c.pageable {
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
				100*r.Threshold, bestName, best, fmtutil.FormatNs(dur), describeSites(sites)),
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

// gbps is bytes per nanosecond, which is GB/s (10^9 bytes per second),
// the unit Kineto's "memory bandwidth (GB/s)" uses.
func gbps(bytes, ns int64) float64 { return float64(bytes) / float64(ns) }

// gpuInterval is a busy range on one device, ns.
type gpuInterval struct{ start, end int64 }

// deviceBusy merges each device's kernel, memcpy and memset ranges over all
// streams into disjoint sorted intervals.
func deviceBusy(in *Input) map[int16][]gpuInterval {
	return Memo(in, "gpu.device-busy", func() map[int16][]gpuInterval {
		raw := map[int16][]gpuInterval{}
		for i := range in.Trace.DeviceOps {
			d := &in.Trace.DeviceOps[i]
			switch d.Cat {
			case chrometrace.CatKernel, chrometrace.CatGPUMemcpy, chrometrace.CatGPUMemset:
				raw[d.Device] = append(raw[d.Device], gpuInterval{d.Start, d.End()})
			}
		}
		for dev, l := range raw {
			slices.SortFunc(l, func(a, b gpuInterval) int { return cmp.Compare(a.start, b.start) })
			merged := l[:0]
			for _, iv := range l {
				if n := len(merged); n > 0 && iv.start <= merged[n-1].end {
					merged[n-1].end = max(merged[n-1].end, iv.end)
					continue
				}
				merged = append(merged, iv)
			}
			raw[dev] = slices.Clip(merged)
		}
		return raw
	})
}

// gpuStepIdle is one step's GPU idleness on one device.
type gpuStepIdle struct {
	fraction float64
	idle     int64       // ns
	gaps     int         // idle ranges
	gap      gpuInterval // the largest idle range inside the step
}

func idleInWindow(busy []gpuInterval, w gpuWindow) gpuStepIdle {
	// busy is sorted and disjoint, so both starts and ends increase.
	k, _ := slices.BinarySearchFunc(busy, w.Start, func(iv gpuInterval, t int64) int { return cmp.Compare(iv.end, t) })
	cursor := w.Start
	var idle int64
	var gap gpuInterval
	gaps := 0
	note := func(s, e int64) {
		if e > s {
			gaps++
			idle += e - s
			if e-s > gap.end-gap.start {
				gap = gpuInterval{s, e}
			}
		}
	}
	for ; k < len(busy) && busy[k].start < w.End; k++ {
		s := max(busy[k].start, w.Start)
		note(cursor, s)
		cursor = max(cursor, min(busy[k].end, w.End))
	}
	note(cursor, w.End)
	return gpuStepIdle{fraction: float64(idle) / float64(w.End-w.Start), idle: idle, gaps: gaps, gap: gap}
}

func checkIdleGaps(r *Rule, in *Input) []Finding {
	w := stepWindows(in)
	busy := deviceBusy(in)
	if len(w.list) == 0 || len(busy) == 0 {
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
		fracs := make([]float64, len(w.list))
		namedShares := make([]float64, len(w.list))
		var worst gpuStepIdle
		worstStep := 0
		var idleTotal, stepTotal int64
		var charged idleCauses
		gapCount := 0
		for i, s := range w.list {
			si := idleInWindow(busy[dev], s)
			fracs[i] = si.fraction
			c := causesInWindow(busy[dev], s, causes)
			charged.data += c.data
			charged.sync += c.sync
			charged.pageable += c.pageable
			namedShares[i] = float64(c.named()) / float64(max(si.idle, 1))
			idleTotal += si.idle
			gapCount += si.gaps
			stepTotal += s.End - s.Start
			if si.gap.end-si.gap.start > worst.gap.end-worst.gap.start {
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
		// A cause is named when it accounts for at least half the idle
		// time of the median step; otherwise the host is simply slower
		// than the device (info, under gpu.launch-bound).
		named := medianOf(namedShares) >= 0.5
		if named != (r.ID == ruleIdleGaps) {
			continue
		}
		gapLen := worst.gap.end - worst.gap.start
		doing := hostDuring(in, worst.gap)
		var loc *site.Location
		if s := w.list[worstStep]; gapLen > 0 {
			loc = pyFrameIndex(in).userLocation(s.Thread, worst.gap.start+gapLen/2)
		}
		stepLabel := "the trace"
		if !w.wholeTrace {
			stepLabel = fmt.Sprintf("ProfilerStep#%d", w.list[worstStep].Number)
		}
		hostText := "no host operator was recorded during it"
		op := ""
		if len(doing) > 0 {
			hostText = "the host was in " + describeHostOps(doing)
			op = doing[0].name
		}
		// One long gap is a stall (data loading, a sync); idle time spread
		// over many short gaps means the host launches kernels slower than
		// the GPU runs them.
		meanGap := idleTotal / int64(max(gapCount, 1))
		shape := fmt.Sprintf("The idle time is spread over %d gaps (mean %s): the GPU waits for the host to launch work (CPU or launch bound).", gapCount, fmtutil.FormatNs(meanGap))
		advice := "Many short gaps mean the host cannot launch kernels as fast as the GPU runs them: " +
			"use larger batches, fuse small ops with torch.compile (mode=\"reduce-overhead\" adds CUDA graphs), " +
			"and remove per-step host syncs (.item(), .cpu())."
		if 2*gapLen >= worst.idle {
			shape = "Most of that step's idle time is one stall."
			advice = "Find what the host does in the gap (above). If it is data loading: DataLoader(num_workers>0, " +
				"pin_memory=True, prefetch_factor=2+, persistent_workers=True), move preprocessing to the GPU, or prefetch " +
				"the next batch on a side stream; if it is a host sync (.item(), .cpu()), move it out of the step."
		}
		title := fmt.Sprintf("GPU %d idle %.0f%% of the median step", dev, 100*median)
		if named {
			cause, why, what := charged.main(stepTotal)
			title += ": " + cause
			shape += " " + why
			advice = what
		} else if 2*gapLen >= worst.idle && op != "" {
			title += ": one stall per step while the host ran " + op
		} else {
			title += ": the host launches work slower than the GPU runs it"
		}
		out = append(out, Finding{
			Title: title,
			Detail: fmt.Sprintf("On GPU %d no kernel, copy or memset ran for %.0f%% of the median step (max %.0f%%, %.0f%% of all %d step(s) together). %s "+
				"The largest gap, %s in %s, began %s into the step; %s.%s",
				dev, 100*median, 100*sorted[len(sorted)-1], 100*float64(idleTotal)/float64(max(stepTotal, 1)), len(w.list), shape,
				fmtutil.FormatNs(gapLen), stepLabel, fmtutil.FormatNs(worst.gap.start-w.list[worstStep].Start), hostText, w.note()),
			Advice:   advice,
			Operator: op,
			Location: loc,
			Metrics: map[string]float64{
				"device":                         float64(dev),
				"steps":                          float64(len(w.list)),
				"median_idle_fraction":           median,
				"max_idle_fraction":              sorted[len(sorted)-1],
				"total_idle_fraction":            float64(idleTotal) / float64(max(stepTotal, 1)),
				"largest_gap_us":                 float64(gapLen) / 1e3,
				"largest_gap_step":               float64(w.list[worstStep].Number),
				"largest_gap_offset_us":          float64(worst.gap.start-w.list[worstStep].Start) / 1e3,
				"gaps":                           float64(gapCount),
				"mean_gap_us":                    float64(meanGap) / 1e3,
				"largest_gap_share_of_step_idle": float64(gapLen) / float64(max(worst.idle, 1)),
				"data_wait_fraction":             float64(charged.data) / float64(max(stepTotal, 1)),
				"sync_wait_fraction":             float64(charged.sync) / float64(max(stepTotal, 1)),
				"pageable_wait_fraction":         float64(charged.pageable) / float64(max(stepTotal, 1)),
				"median_named_share_of_idle":     medianOf(namedShares),
			},
		})
	}
	return out
}

// gapHostActivity is a top-level host range and how long it overlapped a gap.
type gapHostActivity struct {
	name    string
	overlap int64
}

// hostDuring lists the outermost host ranges (below ProfilerStep) that
// overlap gap, summed per name, longest first.
func hostDuring(in *Input, gap gpuInterval) []gapHostActivity {
	if gap.end <= gap.start {
		return nil
	}
	t := in.Trace
	var cand []int
	for i := range t.HostOps {
		h := &t.HostOps[i]
		if h.Start < gap.end && h.End() > gap.start && h.Cat != chrometrace.CatOverhead &&
			!strings.HasPrefix(t.Str(h.Name), "ProfilerStep#") {
			cand = append(cand, i)
		}
	}
	h := t.HostOps
	slices.SortFunc(cand, func(a, b int) int {
		if c := cmp.Compare(h[a].Thread, h[b].Thread); c != 0 {
			return c
		}
		if c := cmp.Compare(h[a].Start, h[b].Start); c != 0 {
			return c
		}
		return cmp.Compare(h[b].End(), h[a].End())
	})
	sums := map[string]int64{}
	var curEnd int64
	for k, i := range cand {
		if k == 0 || h[cand[k-1]].Thread != h[i].Thread {
			curEnd = -1 << 62
		}
		if h[i].Start < curEnd && h[i].End() <= curEnd {
			continue // inside an op already counted
		}
		curEnd = h[i].End()
		sums[t.Str(h[i].Name)] += min(h[i].End(), gap.end) - max(h[i].Start, gap.start)
	}
	out := make([]gapHostActivity, 0, len(sums))
	for n, d := range sums {
		out = append(out, gapHostActivity{n, d})
	}
	slices.SortFunc(out, func(a, b gapHostActivity) int {
		if c := cmp.Compare(b.overlap, a.overlap); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

func describeHostOps(l []gapHostActivity) string {
	var b strings.Builder
	for i, a := range l {
		if i == maxListedOperators {
			fmt.Fprintf(&b, " and %d more", len(l)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s)", a.name, fmtutil.FormatNs(a.overlap))
	}
	return b.String()
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

// main names the largest cause of the charged idle time, says what it is
// in numbers of step time and what to do.
func (c idleCauses) main(stepTotal int64) (cause, why, advice string) {
	pct := func(n int64) float64 { return 100 * float64(n) / float64(max(stepTotal, 1)) }
	switch {
	case c.data >= c.sync && c.data >= c.pageable:
		return "input starvation",
			fmt.Sprintf("The host was fetching the next batch (DataLoader) during idle time making %.0f%% of all step time: the GPU waits for data.", pct(c.data)),
			"Load data ahead of the GPU: DataLoader(num_workers>0, pin_memory=True, prefetch_factor=2+, persistent_workers=True), " +
				"move preprocessing to the GPU, or prefetch the next batch on a side stream."
	case c.sync >= c.pageable:
		return "a host sync every step",
			fmt.Sprintf("Gaps opening while the host waited in a synchronize (torch.cuda.synchronize(), .item(), .cpu(), a synchronous copy) make %.0f%% of all step time: "+
				"each sync drains the GPU's queue, which stays empty until the host launches again.", pct(c.sync)),
			"Remove per-step host syncs: accumulate metrics on the GPU and read them every N steps; copy results with " +
				"non_blocking=True into pinned memory; drop torch.cuda.synchronize() from the loop."
	default:
		return "pageable host-to-device copies",
			fmt.Sprintf("Gaps opening while the host copied from pageable memory make %.0f%% of all step time: the driver stages those copies synchronously.", pct(c.pageable)),
			"Pin the source (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with .to(device, non_blocking=True)."
	}
}
