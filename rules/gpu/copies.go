package gpu

import (
	"cmp"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/rules/site"
)

// WholeTraceStep numbers the one window of a trace without ProfilerStep
// annotations.
const WholeTraceStep = -1

// Window is one ProfilerStep on the host, or the whole trace when the
// profiler ran without a schedule.
type Window struct {
	Number     int64 // step number, WholeTraceStep for the whole trace
	Start, End int64 // ns
	Thread     chrometrace.ThreadID
}

// Windows are a trace's steps on the host, sorted by Start and disjoint.
type Windows struct {
	List       []Window // sorted by Start, disjoint
	WholeTrace bool     // no ProfilerStep: one window spanning every event
}

// index returns the window holding ts, or -1.
func (w *Windows) Index(ts int64) int {
	i, _ := slices.BinarySearchFunc(w.List, ts, func(x Window, t int64) int {
		if x.Start > t {
			return 1
		}
		return -1
	})
	// i is the first window starting after ts; the one before may hold it.
	if i > 0 && ts <= w.List[i-1].End {
		return i - 1
	}
	return -1
}

// Note is the sentence a finding adds when the trace has no steps.
func (w *Windows) Note() string {
	if w.WholeTrace {
		return " The trace has no ProfilerStep annotations (profiler without a schedule), so the whole trace counts as one step."
	}
	return ""
}

// StepWindows are the trace's ProfilerSteps on the host, or one window
// over every event when the profiler ran without a schedule.
func StepWindows(t *chrometrace.Trace) *Windows {
	w := &Windows{}
	seen := map[int64]bool{}
	for _, s := range t.Steps {
		if seen[s.Number] || s.Dur <= 0 {
			continue
		}
		seen[s.Number] = true
		w.List = append(w.List, Window{Number: s.Number, Start: s.Start, End: s.End(), Thread: s.Thread})
	}
	if len(w.List) > 0 {
		slices.SortFunc(w.List, func(a, b Window) int { return cmp.Compare(a.Start, b.Start) })
		return w
	}
	w.WholeTrace = true
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
		w.List = []Window{{Number: WholeTraceStep, Start: lo, End: hi, Thread: t.MainThread()}}
	}
	return w
}

// Direction classifies a gpu_memcpy by its name, which Kineto writes as
// "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)"...
type Direction uint8

const (
	OtherCopy Direction = iota
	H2D
	D2H
)

func (d Direction) String() string {
	switch d {
	case H2D:
		return "host-to-device"
	case D2H:
		return "device-to-host"
	}
	return "other"
}

// ClassifyCopy reads a gpu_memcpy's direction and source from its name.
func ClassifyCopy(name string) (dir Direction, pageable bool) {
	switch {
	case strings.HasPrefix(name, "Memcpy HtoD"):
		dir = H2D
	case strings.HasPrefix(name, "Memcpy DtoH"):
		dir = D2H
	default:
		return OtherCopy, false
	}
	return dir, strings.Contains(name, "Pageable")
}

// HostCopy is one host<->device copy with what the host did to issue it.
type HostCopy struct {
	Op       int // index in Trace.DeviceOps
	Dir      Direction
	Pageable bool
	Bytes    int64
	Dur      int64 // device time, ns
	// Issuer is the cpu_op with the copy's External id (aten::copy_,
	// aten::_local_scalar_dense), -1 when the trace has none.
	Issuer int
	// Site is the outermost cpu_op enclosing the issuer (aten::item,
	// aten::to), the operator the user called.
	Site string
	// Chain is "outer > ... > issuer".
	Chain string
	// Launch is when the host asked for the copy (its cuda_runtime call),
	// which decides its step: the device may run it later.
	Launch int64
	// Blocked is the host time in the runtime calls tied to the copy
	// (cudaMemcpyAsync, cudaStreamSynchronize): time the host waited.
	Blocked int64
	// Blocking: the host waited for this copy (a synchronize call, a
	// synchronous cudaMemcpy, or pageable memory, which the driver copies
	// synchronously), or the trace has no runtime calls to tell.
	Blocking bool
	// Waited: a synchronize call carries the copy's External id (the host
	// waited for this copy itself, not only for a synchronous API).
	Waited   bool
	Location *site.Location
	// LibraryAdvice names the switch of the known library loop that issued
	// the copy (librarySyncSwitches), or is "".
	LibraryAdvice string
}

// FindHostCopies pairs each H2D/D2H copy with the host ops of its External id.
func FindHostCopies(t *chrometrace.Trace) []HostCopy {
	var copies []HostCopy
	want := map[int64][]int{} // External id -> copies
	for i := range t.DeviceOps {
		d := &t.DeviceOps[i]
		if d.Cat != chrometrace.CatGPUMemcpy {
			continue
		}
		dir, pageable := ClassifyCopy(t.Str(d.Name))
		if dir == OtherCopy {
			continue
		}
		copies = append(copies, HostCopy{Op: i, Dir: dir, Pageable: pageable, Bytes: d.Bytes, Dur: d.Dur, Issuer: -1, Launch: d.Start})
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
				if copies[c].Issuer < 0 || t.HostOps[copies[c].Issuer].Dur > h.Dur {
					copies[c].Issuer = i
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
			copies[ids[0]].Blocked += h.Dur
			if waits := !isCopy || !strings.Contains(name, "Async"); waits {
				for _, c := range ids {
					copies[c].Blocking = true
					copies[c].Waited = copies[c].Waited || !isCopy
				}
			}
			if isCopy {
				for _, c := range ids {
					if !launchSeen[c] {
						copies[c].Launch, launchSeen[c] = h.Start, true
					}
				}
			}
		}
	}
	for i := range copies {
		if !launchSeen[i] && copies[i].Issuer >= 0 {
			copies[i].Launch = t.HostOps[copies[i].Issuer].Start
		}
		if copies[i].Pageable || !runtimeSeen[i] {
			copies[i].Blocking = true
		}
	}
	return copies
}

// AttributeCopies names the operator and Python line behind each copy.
func AttributeCopies(t *chrometrace.Trace, copies []HostCopy, nest *Nesting, frames *FrameIndex) []HostCopy {
	for i := range copies {
		c := &copies[i]
		if c.Issuer < 0 {
			c.Site, c.Chain = "(no host operator)", "(no host operator)"
			continue
		}
		issuer := &t.HostOps[c.Issuer]
		names := []string{t.Str(issuer.Name)}
		for p := nest.Parent(c.Issuer); p >= 0 && t.HostOps[p].Cat == chrometrace.CatCPUOp; p = nest.Parent(p) {
			names = append(names, t.Str(t.HostOps[p].Name))
		}
		slices.Reverse(names)
		c.Site, c.Chain = names[0], strings.Join(names, " > ")
		c.Location = frames.UserLocation(issuer.Thread, issuer.Start)
		c.LibraryAdvice = frames.librarySwitch(issuer.Thread, issuer.Start, c.Site)
	}
	return copies
}

// Nesting gives each cpu_op and user_annotation its enclosing op on the
// same thread.
type Nesting struct {
	parent []int32 // by HostOps index; -1 at a root or for other categories
}

// Parent is the op enclosing HostOps[i], -1 at a root.
func (n *Nesting) Parent(i int) int { return int(n.parent[i]) }

// HostNesting finds every cpu_op's and user_annotation's enclosing op.
func HostNesting(t *chrometrace.Trace) *Nesting {
	h := t.HostOps
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
	n := &Nesting{parent: make([]int32, len(h))}
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
}

// FrameIndex finds the innermost user Python frame at a time on a thread,
// from python_function events (with_stack=True).
type FrameIndex struct {
	t        *chrometrace.Trace
	byThread map[chrometrace.ThreadID][]int // PyFrames indices by start
	byID     map[int32]int
	// profiled is when the first profiled step began (no steps: unknown,
	// MinInt64): a frame that started before it was already running when
	// profiling began, and the profiler names it by the line it was on
	// then (the loop's tm.step()), not by the call.
	profiled int64
}

// NewFrameIndex indexes the trace's python_function events by thread.
func NewFrameIndex(t *chrometrace.Trace) *FrameIndex {
	fi := &FrameIndex{t: t, byThread: map[chrometrace.ThreadID][]int{}, byID: make(map[int32]int, len(t.PyFrames))}
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
	fi.profiled = math.MinInt64
	for _, st := range t.Steps {
		if fi.profiled == math.MinInt64 || st.Start < fi.profiled {
			fi.profiled = st.Start
		}
	}
	return fi
}

// pyFrameName is "file.py(123): func" as the profiler writes frames.
var pyFrameName = regexp.MustCompile(`^(.+)\((\d+)\): (.+)$`)

// libraryFrame reports frames of torch, installed packages or the
// standard library: the one user-code test (chrometrace.IsLibraryFile).
func libraryFrame(file string) bool { return chrometrace.IsLibraryFile(file) }

// UserLocation is the innermost user (not library) frame enclosing ts
// on thread th, nil when there is none.
func (fi *FrameIndex) UserLocation(th chrometrace.ThreadID, ts int64) *site.Location {
	var loc *site.Location
	fi.enclosing(th, ts, func(file string, line int, function string, pre bool) bool {
		if libraryFrame(file) {
			return true
		}
		// A trace names a frame by its def line; one running since before
		// profiling by the line it was on when profiling began, not this
		// call's: neither is the running line (site.FromTrace).
		loc = (&site.Location{File: file, Line: line, Function: function}).FromTrace(pre)
		return false
	})
	return loc
}

// enclosing calls visit with each Python frame enclosing ts on thread th,
// innermost first, until visit returns false.
func (fi *FrameIndex) enclosing(th chrometrace.ThreadID, ts int64, visit func(file string, line int, function string, pre bool) bool) {
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
				if !visit(m[1], line, m[3], f.Start < fi.profiled) {
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
func (fi *FrameIndex) librarySwitch(th chrometrace.ThreadID, ts int64, site string) string {
	var files []string
	fi.enclosing(th, ts, func(file string, _ int, _ string, _ bool) bool {
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

// LibraryLoopAdvice is the switch advice of every known library loop that
// issued one of the copies keep selects, or "".
func LibraryLoopAdvice(copies []HostCopy, keep func(*HostCopy) bool) string {
	var b strings.Builder
	for _, sw := range librarySyncSwitches {
		for i := range copies {
			if c := &copies[i]; keep(c) && c.LibraryAdvice == sw.advice {
				b.WriteString(sw.advice)
				break
			}
		}
	}
	return b.String()
}

// GBps is bytes per nanosecond, which is GB/s (10^9 bytes per second),
// the unit Kineto's "memory bandwidth (GB/s)" uses.
func GBps(bytes, ns int64) float64 { return float64(bytes) / float64(ns) }

// Interval is a busy range on one device, ns.
type Interval struct{ Start, End int64 }

// deviceBusy merges each device's kernel, memcpy and memset ranges over all
// streams into disjoint sorted intervals.
func DeviceBusy(t *chrometrace.Trace) map[int16][]Interval {
	// Counted first, so that each device's intervals take one array of
	// their size, not append's outgrown ones (a 1 GB trace: 15 MB).
	count := map[int16]int{}
	for i := range t.DeviceOps {
		switch t.DeviceOps[i].Cat {
		case chrometrace.CatKernel, chrometrace.CatGPUMemcpy, chrometrace.CatGPUMemset:
			count[t.DeviceOps[i].Device]++
		}
	}
	raw := make(map[int16][]Interval, len(count))
	for dev, n := range count {
		raw[dev] = make([]Interval, 0, n)
	}
	for i := range t.DeviceOps {
		d := &t.DeviceOps[i]
		switch d.Cat {
		case chrometrace.CatKernel, chrometrace.CatGPUMemcpy, chrometrace.CatGPUMemset:
			raw[d.Device] = append(raw[d.Device], Interval{d.Start, d.End()})
		}
	}
	for dev, l := range raw {
		slices.SortFunc(l, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
		merged := l[:0]
		for _, iv := range l {
			if n := len(merged); n > 0 && iv.Start <= merged[n-1].End {
				merged[n-1].End = max(merged[n-1].End, iv.End)
				continue
			}
			merged = append(merged, iv)
		}
		if len(merged) < cap(l)/2 {
			merged = slices.Clone(merged) // the rest of l is garbage then
		}
		raw[dev] = slices.Clip(merged)
	}
	return raw
}

// StepIdle is one step's GPU idleness on one device.
type StepIdle struct {
	Fraction float64
	Idle     int64    // ns
	Gaps     int      // idle ranges
	Gap      Interval // the largest idle range inside the step
}

// IdleInWindow measures the idle time of one device (its busy intervals)
// in one step.
func IdleInWindow(busy []Interval, w Window) StepIdle {
	// busy is sorted and disjoint, so both starts and ends increase.
	k, _ := slices.BinarySearchFunc(busy, w.Start, func(iv Interval, t int64) int { return cmp.Compare(iv.End, t) })
	cursor := w.Start
	var idle int64
	var gap Interval
	gaps := 0
	note := func(s, e int64) {
		if e > s {
			gaps++
			idle += e - s
			if e-s > gap.End-gap.Start {
				gap = Interval{s, e}
			}
		}
	}
	for ; k < len(busy) && busy[k].Start < w.End; k++ {
		s := max(busy[k].Start, w.Start)
		note(cursor, s)
		cursor = max(cursor, min(busy[k].End, w.End))
	}
	note(cursor, w.End)
	return StepIdle{Fraction: float64(idle) / float64(w.End-w.Start), Idle: idle, Gaps: gaps, Gap: gap}
}

// HostActivity is a top-level host range and how long it overlapped a gap.
type HostActivity struct {
	Name    string
	Overlap int64
}

// hostDuring lists the outermost host ranges (below ProfilerStep) that
// overlap gap, summed per name, longest first.
func HostDuring(t *chrometrace.Trace, gap Interval) []HostActivity {
	if gap.End <= gap.Start {
		return nil
	}
	var cand []int
	for i := range t.HostOps {
		h := &t.HostOps[i]
		if h.Start < gap.End && h.End() > gap.Start && h.Cat != chrometrace.CatOverhead &&
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
		sums[t.Str(h[i].Name)] += min(h[i].End(), gap.End) - max(h[i].Start, gap.Start)
	}
	out := make([]HostActivity, 0, len(sums))
	for n, d := range sums {
		out = append(out, HostActivity{n, d})
	}
	slices.SortFunc(out, func(a, b HostActivity) int {
		if c := cmp.Compare(b.Overlap, a.Overlap); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
