package snapshot

import (
	"fmt"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// Stats sums the segments and blocks of a snapshot, the way
// torch.cuda.memory_stats() and `python -m torch.cuda._memory_viz stats`
// count them at the moment of the dump.
type Stats struct {
	Segments           int   `json:"segments"`
	SmallSegments      int   `json:"small_segments"`
	LargeSegments      int   `json:"large_segments"`
	ExpandableSegments int   `json:"expandable_segments"`
	Blocks             int   `json:"blocks"`
	AllocatedBlocks    int   `json:"allocated_blocks"`
	PendingFreeBlocks  int   `json:"pending_free_blocks"`
	InactiveBlocks     int   `json:"inactive_blocks"`
	Devices            []int `json:"devices"`

	// ReservedBytes: sum of segment total_size (cudaMalloc'd by the cache;
	// memory_stats reserved_bytes.all.current).
	ReservedBytes int64 `json:"reserved_bytes"`
	// AllocatedBytes: sum of active_allocated block sizes, rounded as the
	// allocator hands them out (allocated_bytes.all.current; equals the sum
	// of segment allocated_size).
	AllocatedBytes int64 `json:"allocated_bytes"`
	// ActiveBytes adds blocks freed by Python but still in use by a stream
	// (active_pending_free).
	ActiveBytes int64 `json:"active_bytes"`
	// RequestedBytes: what callers asked for, before the allocator rounded
	// up (requested_bytes.all.current).
	RequestedBytes int64 `json:"requested_bytes"`
	// RequestedNotRecorded: some live block records no requested_size
	// (older torch), so RequestedBytes and the rounding waste are unknown.
	RequestedNotRecorded bool `json:"requested_not_recorded,omitempty"`
	// FreeBytes: inactive blocks, reserved but not in use (ReservedBytes -
	// ActiveBytes).
	FreeBytes int64 `json:"free_bytes"`
	// InactiveSplitBytes: free blocks inside segments that also hold active
	// blocks. empty_cache() cannot return them to CUDA; they are the
	// fragmentation that memory_stats calls inactive_split_bytes. Like
	// torch, expandable segments are left out (their free pages unmap).
	InactiveSplitBytes  int64 `json:"inactive_split_bytes"`
	InactiveSplitBlocks int   `json:"inactive_split_blocks"`
	// LargestFreeBlock is the biggest request the cache can serve without a
	// new cudaMalloc (per stream and pool, in fact; this ignores both).
	LargestFreeBlock int64 `json:"largest_free_block"`
}

// SegmentFill describes how full one segment is, with a text bar.
type SegmentFill struct {
	Device           int    `json:"device"`
	Address          uint64 `json:"address"`
	SegmentType      string `json:"segment_type"`
	Stream           int64  `json:"stream"`
	Expandable       bool   `json:"is_expandable"`
	TotalSize        int64  `json:"total_size"`
	AllocatedBytes   int64  `json:"allocated_bytes"` // active_allocated blocks
	ActiveBytes      int64  `json:"active_bytes"`    // allocated + pending free
	FreeBytes        int64  `json:"free_bytes"`
	LargestFreeBlock int64  `json:"largest_free_block"`
	Blocks           int    `json:"blocks"`
	// Bar has one cell per 1/width of the segment: '#' full, '1'..'9'
	// tenths in use, '0' under a tenth, '.' free.
	Bar string `json:"bar"`
}

// LeakCandidate groups allocations from the device trace that were never
// freed before the trace ended, by the user's innermost Python frame. Live
// memory at the end is not always a leak (parameters, the current batch);
// memory that grows with the number of steps is.
type LeakCandidate struct {
	Device int   `json:"device"`
	Site   Frame `json:"site"`
	// Stack lists the Python frames (innermost first, all of them, C++
	// frames dropped) of the group's latest allocation.
	Stack []Frame `json:"stack"`
	Bytes int64   `json:"bytes"`
	Count int     `json:"count"`
	// Steps counts the distinct ProfilerStep#N ranges (from the snapshot's
	// external annotations) in which the group's live allocations were
	// made: a leak leaves memory behind in every step, a model's
	// parameters and optimizer state in one.
	Steps int `json:"steps"`
	// ActiveAtDumpBytes counts the allocations whose address is still an
	// active block in the snapshot's segments; the rest were freed after
	// recording stopped or the trace dropped the free.
	ActiveAtDumpBytes int64 `json:"active_at_dump_bytes"`
	FirstTimeUS       int64 `json:"first_time_us"`
	LastTimeUS        int64 `json:"last_time_us"`
	// TimesUS are the group's live allocations' times, in order: with no
	// step annotations, their recurrence tells a per-iteration leak.
	TimesUS []int64 `json:"-"`
	// Sizes are the same allocations' sizes.
	Sizes []int64 `json:"-"`
	// StepBytes is what the group kept from each ProfilerStep#N, in step
	// order (steps it kept nothing from are left out).
	StepBytes []StepBytes `json:"step_bytes"`
	// MaxRetentionSteps is the most step boundaries a freed allocation of
	// the same site lived across: a rolling buffer of K steps frees what
	// it kept K steps later, a leak never does.
	MaxRetentionSteps int `json:"max_retention_steps"`
	// LibraryAllocs counts allocations made inside library code called by
	// the site (a layer's forward computing an output or saving an
	// activation), as against allocations made on the site's own line.
	LibraryAllocs int `json:"library_allocs"`
	// CopyAllocs counts allocations whose C++ frames show a copy (clone,
	// copy_, to): a tensor duplicated to be kept.
	CopyAllocs int `json:"copy_allocs"`
	// HookFrame is set when the site runs as a hook: called by
	// torch/nn/modules/module.py's hook dispatch rather than as forward.
	HookFrame *Frame `json:"hook_frame,omitempty"`
}

// StepBytes is what a leak candidate kept from one step.
type StepBytes struct {
	Step  int   `json:"step"`
	Bytes int64 `json:"bytes"`
	Count int   `json:"count"`
	// Lines counts the distinct innermost Python frames that made them:
	// one for a tensor kept from the site's own line, several when a
	// model's internals (outputs and saved activations) stay.
	Lines int `json:"lines"`
	// BackwardAfter: autograd's engine allocated later in the same step.
	BackwardAfter bool `json:"backward_after"`
	lines         map[Frame]bool
}

// OOMEvent is an out-of-memory recorded in a device trace.
type OOMEvent struct {
	Device          int   `json:"device"`
	TimeUS          int64 `json:"time_us"`
	RequestedBytes  int64 `json:"requested_bytes"`
	DeviceFreeBytes int64 `json:"device_free_bytes"`
	Stream          int64 `json:"stream"`
	Site            Frame `json:"site"`
	// State is the allocator when the request failed (StateAtOOM).
	State OOMState `json:"state"`
}

// Report is everything torchmem derives from one snapshot.
type Report struct {
	Stats    Stats             `json:"stats"`
	Settings AllocatorSettings `json:"allocator_settings"`
	// SegmentFills lists every segment, largest first.
	SegmentFills []SegmentFill   `json:"segments"`
	Leaks        []LeakCandidate `json:"leak_candidates"`
	OOMs         []OOMEvent      `json:"ooms"`
	// TraceEntries counts device_traces entries by action.
	TraceEntries map[string]int `json:"trace_entries"`
	// TraceStartUS and TraceEndUS bound the recorded history (epoch µs).
	TraceStartUS int64 `json:"trace_start_us"`
	TraceEndUS   int64 `json:"trace_end_us"`
	// Steps are the ProfilerStep#N numbers the history annotates, in
	// order; BackwardSteps those in which autograd's backward allocated.
	Steps         []int `json:"steps"`
	BackwardSteps []int `json:"backward_steps"`
	// Pools are the private pools (CUDA graphs, torch.cuda.MemPool) and
	// what each holds; Labels the history's allocations by
	// compile_context and user_metadata; Annotations the
	// record_function ranges by name; NoHistory what a snapshot without
	// history cannot tell. Each only when the snapshot has it.
	Pools       []PoolUse       `json:"pools,omitempty"`
	Labels      []LabelUse      `json:"labels,omitempty"`
	Annotations []AnnotationUse `json:"annotations,omitempty"`
	NoHistory   string          `json:"no_history,omitempty"`
}

// DefaultBarWidth is the number of cells in a segment fill bar.
const DefaultBarWidth = 40

// Analyze computes the report for s; barWidth <= 0 means
// DefaultBarWidth. This is the entry point for commands.
func Analyze(s *Snapshot, barWidth int) *Report {
	if barWidth <= 0 {
		barWidth = DefaultBarWidth
	}
	rep := &Report{
		Stats:        s.Stats(),
		Settings:     s.AllocatorSettings,
		SegmentFills: s.SegmentFills(barWidth),
	}
	if rep.Settings.Recorded == nil {
		rep.Settings.Recorded = []string{} // none recorded: [] in JSON, not null
	}
	// The history is read in two passes at once: the leak candidates and
	// the labels (one replay of each device's trace serves both), and
	// the OOMs, the steps and the counts (a large history took a second
	// each).
	var wg sync.WaitGroup
	wg.Go(func() {
		var live [][]int
		rep.Leaks, live = s.leakCandidates()
		rep.Labels = s.labels(live)
	})
	rep.OOMs = s.OOMs()
	rep.Steps, rep.BackwardSteps = s.stepsWithBackward()
	rep.Pools, rep.Annotations, rep.NoHistory = s.Pools(), s.AnnotationNames(), s.NoHistory()
	rep.TraceEntries, rep.TraceStartUS, rep.TraceEndUS = s.actionCounts()
	wg.Wait()
	return rep
}

// actionCounts counts the history's entries by action, with the first and
// last time.
func (s *Snapshot) actionCounts() (counts map[string]int, start, end int64) {
	// The actions are a few strs shared by every entry: counted in a
	// short list, compared by pointer before text, and made a map once.
	type count struct {
		action string
		n      int
	}
	var cs []count
	counts = map[string]int{} // past maxListed actions (not a snapshot torch wrote)
	for _, tr := range s.DeviceTraces {
		for _, e := range tr.All() {
			k := 0
			for k < len(cs) && !sameStr(cs[k].action, e.Action) {
				k++
			}
			switch {
			case k < len(cs):
				cs[k].n++
			case k < maxListed:
				cs = append(cs, count{action: e.Action, n: 1})
			default:
				counts[e.Action]++
			}
			if start == 0 || e.TimeUS < start {
				start = e.TimeUS
			}
			end = max(end, e.TimeUS)
		}
	}
	for _, c := range cs {
		counts[c.action] += c.n
	}
	return counts, start, end
}

// maxListed is how many actions actionCounts counts in its list; torch
// has nine.
const maxListed = 16

// sameStr is a == b, quick when they share their bytes.
func sameStr(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// Stats sums segments and blocks.
func (s *Snapshot) Stats() Stats {
	var st Stats
	devs := map[int]bool{}
	for _, seg := range s.Segments {
		st.Segments++
		devs[seg.Device] = true
		switch seg.SegmentType {
		case "small":
			st.SmallSegments++
		case "large":
			st.LargeSegments++
		}
		if seg.IsExpandable {
			st.ExpandableSegments++
		}
		st.ReservedBytes = chrometrace.AddSat(st.ReservedBytes, seg.TotalSize)
		active := false
		var free int64
		var freeBlocks int
		for _, b := range seg.Blocks {
			st.Blocks++
			switch b.State {
			case BlockActiveAllocated:
				st.AllocatedBlocks++
				st.AllocatedBytes = chrometrace.AddSat(st.AllocatedBytes, b.Size)
				st.ActiveBytes = chrometrace.AddSat(st.ActiveBytes, b.Size)
				st.RequestedBytes = chrometrace.AddSat(st.RequestedBytes, b.RequestedSize)
				st.RequestedNotRecorded = st.RequestedNotRecorded || b.NoRequested
				active = true
			case BlockActivePendingFree:
				st.PendingFreeBlocks++
				st.ActiveBytes = chrometrace.AddSat(st.ActiveBytes, b.Size)
				active = true
			default:
				st.InactiveBlocks++
				free = chrometrace.AddSat(free, b.Size)
				freeBlocks++
				st.LargestFreeBlock = max(st.LargestFreeBlock, b.Size)
			}
		}
		st.FreeBytes = chrometrace.AddSat(st.FreeBytes, free)
		// torch leaves expandable segments out of inactive_split: their
		// free pages can always be unmapped (empty_cache) and reused.
		if active && !seg.IsExpandable {
			st.InactiveSplitBytes = chrometrace.AddSat(st.InactiveSplitBytes, free)
			st.InactiveSplitBlocks += freeBlocks
		}
	}
	for d := range devs {
		st.Devices = append(st.Devices, d)
	}
	sort.Ints(st.Devices)
	return st
}

// SegmentFills returns every segment's fill, largest segment first (then by
// device and address), each with a bar of width cells.
func (s *Snapshot) SegmentFills(width int) []SegmentFill {
	if width <= 0 {
		width = DefaultBarWidth
	}
	out := make([]SegmentFill, 0, len(s.Segments))
	for _, seg := range s.Segments {
		f := SegmentFill{
			Device: seg.Device, Address: seg.Address, SegmentType: seg.SegmentType,
			Stream: seg.Stream, Expandable: seg.IsExpandable, TotalSize: seg.TotalSize,
			Blocks: len(seg.Blocks),
		}
		used := make([]int64, width)
		var off int64
		for _, b := range seg.Blocks {
			switch b.State {
			case BlockActiveAllocated, BlockActivePendingFree:
				if b.State == BlockActiveAllocated {
					f.AllocatedBytes += b.Size
				}
				f.ActiveBytes += b.Size
				addUsed(used, seg.TotalSize, off, b.Size)
			default:
				f.FreeBytes += b.Size
				f.LargestFreeBlock = max(f.LargestFreeBlock, b.Size)
			}
			off += b.Size
		}
		f.Bar = fillBar(used, seg.TotalSize)
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.TotalSize != b.TotalSize {
			return a.TotalSize > b.TotalSize
		}
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		return a.Address < b.Address
	})
	return out
}

// cellStart is the first byte of cell j when total bytes are cut into
// len(used) cells; integer math keeps every byte in exactly one cell.
func cellStart(total int64, j, cells int) int64 {
	if total <= 0 {
		return 0
	}
	// 128-bit product: total*j overflows int64 for hostile sizes.
	hi, lo := bits.Mul64(uint64(total), uint64(j))
	q, _ := bits.Div64(hi, lo, uint64(cells))
	return int64(q)
}

// addUsed spreads the byte range [off, off+size) over the cells.
func addUsed(used []int64, total, off, size int64) {
	if total <= 0 || size <= 0 {
		return
	}
	end := min(off+size, total)
	cells := len(used)
	for j := 0; j < cells; j++ {
		lo, hi := cellStart(total, j, cells), cellStart(total, j+1, cells)
		if j == cells-1 {
			hi = total
		}
		if hi <= off {
			continue
		}
		if lo >= end {
			break
		}
		used[j] += min(hi, end) - max(lo, off)
	}
}

func fillBar(used []int64, total int64) string {
	var sb strings.Builder
	cells := len(used)
	for j, u := range used {
		lo, hi := cellStart(total, j, cells), cellStart(total, j+1, cells)
		if j == cells-1 {
			hi = total
		}
		size := hi - lo
		switch {
		case u <= 0 || size <= 0:
			sb.WriteByte('.')
		case u >= size:
			sb.WriteByte('#')
		default:
			sb.WriteByte("0123456789"[u*10/size])
		}
	}
	return sb.String()
}

// IsLibraryFrame reports whether a Python frame belongs to torch, an
// installed package or the standard library rather than the user's code
// (one rule for traces and snapshots: chrometrace.IsLibraryFile).
func IsLibraryFrame(f Frame) bool { return chrometrace.IsLibraryFile(f.Filename) }

// UserFrame picks the frame that names an allocation site: the innermost
// Python frame of the user's own code; failing that the innermost Python
// frame; failing that the innermost frame with a name.
func UserFrame(stack []Frame) Frame {
	firstPy := -1
	for i, f := range stack {
		if !f.IsPython() {
			continue
		}
		if firstPy < 0 {
			firstPy = i
		}
		if !IsLibraryFrame(f) {
			return f
		}
	}
	if firstPy >= 0 {
		return stack[firstPy]
	}
	// C++ only (autograd's backward thread, cuBLAS workspaces): the first
	// frame past the unwinder and the allocator says what asked for memory.
	for _, f := range stack {
		if f.Name != "" && !isAllocatorMachinery(f.Name) {
			return f
		}
	}
	for _, f := range stack {
		if f.Name != "" {
			return f
		}
	}
	return Frame{Name: "<no stack recorded>"}
}

// allocatorMachinery prefixes the C++ frames that every recorded stack
// starts with: the unwinder, the caching allocator, the empty-tensor
// factories.
var allocatorMachinery = []string{
	"torch::unwind::", "torch::CapturedTraceback::", "torch::cuda::(anonymous namespace)::gather",
	"c10::cuda::CUDACachingAllocator::", "at::detail::empty", "at::(anonymous namespace)::create_out",
}

func isAllocatorMachinery(name string) bool {
	for _, p := range allocatorMachinery {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// pythonFrames keeps the Python frames of a stack (up to limit, 0 for
// all), innermost first. Stacks recorded with C++ frames put the outermost
// Python frames after the interpreter's own (_start): dropping the C++
// frames leaves the Python ones in call order, caller line included.
func pythonFrames(stack []Frame, limit int) []Frame {
	var out []Frame
	for _, f := range stack {
		if f.IsPython() {
			out = append(out, f)
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

// LeakCandidates replays each device trace: an alloc stays live until a
// later free_requested or free_completed of the same address. What is live
// at the end is grouped by UserFrame; groups that left memory behind in
// the most profiler steps come first, then the biggest.
func (s *Snapshot) LeakCandidates() []LeakCandidate {
	out, _ := s.leakCandidates()
	return out
}

// leakCandidates is LeakCandidates, with the indices of each device's
// allocations live at the end of its history (liveAtEnd's).
func (s *Snapshot) leakCandidates() ([]LeakCandidate, [][]int) {
	activeAtDump := map[uint64]bool{}
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if b.State == BlockActiveAllocated {
				activeAtDump[b.Address] = true
			}
		}
	}
	steps := s.stepRanges()
	c := &candidates{activeAtDump: activeAtDump, groupSteps: map[int]map[int]*StepBytes{}, live: make([][]int, len(s.DeviceTraces))}
	for dev, tr := range s.DeviceTraces {
		c.device(s, dev, tr, steps[dev])
	}
	out := c.out
	for g, set := range c.groupSteps {
		out[g].Steps = len(set)
		for _, sb := range set {
			sb.Lines = len(sb.lines)
			sb.lines = nil
			out[g].StepBytes = append(out[g].StepBytes, *sb)
		}
		sort.Slice(out[g].StepBytes, func(i, j int) bool { return out[g].StepBytes[i].Step < out[g].StepBytes[j].Step })
	}
	// Memory left behind in many steps is the leak signature; among equals,
	// the bigger group first.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Steps != out[j].Steps {
			return out[i].Steps > out[j].Steps
		}
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Count > out[j].Count
	})
	return out, c.live
}

// candidates are the leak candidates being gathered, device after device.
type candidates struct {
	activeAtDump map[uint64]bool // addresses of blocks active at the dump
	out          []LeakCandidate
	// groupSteps: per group (out index), what it kept from each step.
	groupSteps map[int]map[int]*StepBytes
	live       [][]int // per device: liveAtEnd's indices
}

// siteCache finds each stack's site once: stacks are shared.
type siteCache map[*Frame]Frame

func (sites siteCache) of(e *TraceEntry) Frame {
	if len(e.Frames) == 0 {
		return UserFrame(nil)
	}
	if s, ok := sites[&e.Frames[0]]; ok {
		return s
	}
	site := UserFrame(e.Frames)
	sites[&e.Frames[0]] = site
	return site
}

// liveAtEnd replays a device trace: an alloc stays live until a later
// free_requested or free_completed of the same address. It returns the
// indices of the allocations live at the end, in time order, and per site
// the most step boundaries a freed allocation crossed.
func liveAtEnd(tr Trace, steps []stepRange, sites siteCache) (idx []int, retention map[Frame]int) {
	var live AddrMap // addr -> index of its alloc in tr
	retention = map[Frame]int{}
	for i, e := range tr.All() {
		switch e.Action {
		case ActionAlloc:
			live.Set(e.Addr, i)
		case ActionFreeRequested, ActionFreeCompleted:
			if j, ok := live.Delete(e.Addr); ok {
				alloc := tr.At(j)
				a, b := stepIndex(steps, alloc.TimeUS), stepIndex(steps, e.TimeUS)
				if a >= 0 && b > a {
					site := sites.of(&alloc)
					retention[site] = max(retention[site], b-a)
				}
			}
		}
	}
	idx = make([]int, 0, live.Len())
	live.All(func(_ uint64, i int) { idx = append(idx, i) })
	sort.Ints(idx) // time order, so that the first allocation leads its group
	return idx, retention
}

// device groups what device dev's trace left live at the end.
func (c *candidates) device(s *Snapshot, dev int, tr Trace, steps []stepRange) {
	sites := siteCache{}
	idx, retention := liveAtEnd(tr, steps, sites)
	c.live[dev] = idx
	lastBackward := s.lastBackwardPerStep(dev, steps)
	// A group is one user call chain: the same forward called from the
	// training line and from a validation loop holds memory for two
	// different reasons.
	groups := map[string]int{}
	chains := map[*Frame]string{}
	// Stacks are shared: test each one once (the substring tests of
	// copyFrames took a tenth of the CPU on a 600 MB snapshot).
	type stackKey struct {
		first *Frame
		n     int
	}
	flags := map[stackKey][2]bool{}
	stackFlags := func(fr []Frame) (lib, cp bool) {
		if len(fr) == 0 {
			return false, false
		}
		k := stackKey{&fr[0], len(fr)}
		f, ok := flags[k]
		if !ok {
			f = [2]bool{allocatedInLibrary(fr), copyFrames(fr)}
			flags[k] = f
		}
		return f[0], f[1]
	}
	last := map[int]int{} // group -> its latest live allocation
	for _, i := range idx {
		e := tr.At(i)
		site := sites.of(&e)
		key := site.String()
		if len(e.Frames) > 0 {
			k, ok := chains[&e.Frames[0]]
			if !ok {
				k = chainKey(site, e.Frames)
				chains[&e.Frames[0]] = k
			}
			key = k
		}
		g, ok := groups[key]
		if !ok {
			g = len(c.out)
			groups[key] = g
			c.out = append(c.out, LeakCandidate{
				Device: dev, Site: site, Stack: pythonFrames(e.Frames, 0),
				FirstTimeUS: e.TimeUS, MaxRetentionSteps: retention[site], HookFrame: hookFrame(e.Frames),
			})
		}
		lc := &c.out[g]
		last[g] = i
		lc.Bytes += e.Size
		lc.Count++
		lc.LastTimeUS = e.TimeUS
		lc.TimesUS = append(lc.TimesUS, e.TimeUS)
		lc.Sizes = append(lc.Sizes, e.Size)
		if c.activeAtDump[e.Addr] {
			lc.ActiveAtDumpBytes += e.Size
		}
		lib, cp := stackFlags(e.Frames)
		if lib {
			lc.LibraryAllocs++
		}
		if cp {
			lc.CopyAllocs++
		}
		if st := findStep(steps, e.TimeUS); st >= 0 {
			c.addToStep(g, st, &e, lastBackward[st] > e.TimeUS)
		}
	}
	// The latest allocation speaks for its group: the first may be a
	// one-time buffer made at the same line (a workspace, a cache).
	for g, i := range last {
		c.out[g].Stack = pythonFrames(tr.At(i).Frames, 0)
	}
}

// chainKey is a group's key: its site and the user's Python call chain.
func chainKey(site Frame, frames []Frame) string {
	var b strings.Builder
	b.WriteString(site.String())
	b.WriteByte(0)
	for _, f := range frames {
		if f.IsPython() && !IsLibraryFrame(f) {
			b.WriteString(f.String())
			b.WriteByte(0)
		}
	}
	return b.String()
}

// addToStep counts live allocation e in group g's step st; backwardAfter:
// a backward ran later in that step.
func (c *candidates) addToStep(g, st int, e *TraceEntry, backwardAfter bool) {
	if c.groupSteps[g] == nil {
		c.groupSteps[g] = map[int]*StepBytes{}
	}
	sb := c.groupSteps[g][st]
	if sb == nil {
		sb = &StepBytes{Step: st}
		c.groupSteps[g][st] = sb
	}
	sb.Bytes += e.Size
	sb.Count++
	if sb.lines == nil {
		sb.lines = map[Frame]bool{}
	}
	for _, f := range e.Frames {
		if f.IsPython() {
			sb.lines[f] = true
			break
		}
	}
	if backwardAfter {
		sb.BackwardAfter = true
	}
}

// FrameName names a snapshot frame the way profiler traces do, so that a
// line reads the same in every output: "file.py(123): func", library
// paths shortened (torch/nn/modules/module.py), the user's files relative
// to the directory of the script the stack started in (its outermost
// "<module>" frame: Python puts that directory first on sys.path, and the
// profiler names files relative to sys.path). C++ frames keep their name.
func FrameName(f Frame, stack []Frame) string {
	if root := scriptDir(stack); root != "" && strings.HasPrefix(f.Filename, root) {
		f.Filename = f.Filename[len(root):]
	}
	return f.String()
}

func scriptDir(stack []Frame) string {
	for i := len(stack) - 1; i >= 0; i-- {
		f := stack[i]
		if !f.IsPython() {
			continue
		}
		if f.Name != "<module>" || IsLibraryFrame(f) {
			return ""
		}
		if j := strings.LastIndexByte(f.Filename, '/'); j >= 0 {
			return f.Filename[:j+1]
		}
		return ""
	}
	return ""
}

// allocatedInLibrary: the innermost Python frame of the allocation is
// library code (a layer's forward, a functional), not the user's line.
func allocatedInLibrary(stack []Frame) bool {
	for _, f := range stack {
		if f.IsPython() {
			return IsLibraryFrame(f)
		}
	}
	return false
}

// copyFrames: the C++ frames show a tensor copy.
func copyFrames(stack []Frame) bool {
	for _, f := range stack {
		if f.IsPython() {
			return false
		}
		for _, c := range []string{"at::native::clone", "at::_ops::clone::", "at::native::_to_copy", "at::_ops::_to_copy::", "THPVariable_clone", "at::_ops::copy_::"} {
			if strings.Contains(f.Name, c) {
				return true
			}
		}
	}
	return false
}

// hookFrame returns the user frame that torch/nn/modules/module.py called
// other than as forward (a forward or backward hook), or nil.
func hookFrame(stack []Frame) *Frame {
	py := pythonFrames(stack, 0)
	for i := 0; i+1 < len(py); i++ {
		f, caller := py[i], py[i+1]
		if !IsLibraryFrame(f) && f.Name != "forward" && strings.HasSuffix(caller.Filename, "torch/nn/modules/module.py") {
			return &f
		}
	}
	return nil
}

// stepsWithBackward lists the annotated ProfilerStep numbers and those in
// which autograd's engine allocated (its C++ or Python frames).
func (s *Snapshot) stepsWithBackward() (all, backward []int) {
	ranges := s.stepRanges()
	seen, bwd, allocated := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for _, r := range ranges {
		for _, sr := range r {
			seen[sr.step] = true
		}
	}
	for dev, tr := range s.DeviceTraces {
		checked := map[*Frame]bool{}
		for _, e := range tr.All() {
			if e.Action != ActionAlloc || len(e.Frames) == 0 {
				continue
			}
			st := findStep(ranges[dev], e.TimeUS)
			if st >= 0 {
				allocated[st] = true
			}
			if st < 0 || bwd[st] {
				continue
			}
			isBwd, ok := checked[&e.Frames[0]]
			if !ok {
				isBwd = backwardFrames(e.Frames)
				checked[&e.Frames[0]] = isBwd
			}
			if isBwd {
				bwd[st] = true
			}
		}
	}
	for st := range seen {
		all = append(all, st)
		if bwd[st] {
			backward = append(backward, st)
		}
	}
	sort.Ints(all)
	sort.Ints(backward)
	// The profiler opens one more ProfilerStep when its last cycle ends
	// and closes it at once: a last step in which nothing was allocated
	// is that stub, not a step the run took (it would read as a step that
	// kept nothing: a missed beat of a periodic leak).
	if n := len(all); n > 0 && !allocated[all[n-1]] {
		all = all[:n-1] // never in backward: backward needs an allocation
	}
	return all, backward
}

func backwardFrames(stack []Frame) bool {
	for _, f := range stack {
		if strings.Contains(f.Name, "torch::autograd::Engine::") || strings.Contains(f.Name, "_engine_run_backward") ||
			(f.Name == "backward" && strings.HasSuffix(f.Filename, "torch/autograd/__init__.py")) {
			return true
		}
	}
	return false
}

// lastBackwardPerStep maps each step of device dev to the time of the
// last allocation autograd's engine made in it.
func (s *Snapshot) lastBackwardPerStep(dev int, ranges []stepRange) map[int]int64 {
	out := map[int]int64{}
	if dev >= len(s.DeviceTraces) {
		return out
	}
	checked := map[*Frame]bool{}
	for _, e := range s.DeviceTraces[dev].All() {
		if e.Action != ActionAlloc {
			continue
		}
		// Recorded with Python stacks only, the engine's threads have no
		// frames at all: no Python thread allocates without a frame.
		isBwd := true
		if len(e.Frames) > 0 {
			var ok bool
			isBwd, ok = checked[&e.Frames[0]]
			if !ok {
				isBwd = backwardFrames(e.Frames)
				checked[&e.Frames[0]] = isBwd
			}
		}
		if st := findStep(ranges, e.TimeUS); isBwd && st >= 0 {
			out[st] = max(out[st], e.TimeUS)
		}
	}
	return out
}

// stepIndex is the index of the step window holding t, or -1.
func stepIndex(r []stepRange, t int64) int {
	i := sort.Search(len(r), func(i int) bool { return r[i].start > t }) - 1
	if i >= 0 && t <= r[i].end {
		return i
	}
	return -1
}

// stepRange is one ProfilerStep#N window in epoch microseconds.
type stepRange struct {
	start, end int64
	step       int
}

// stepRanges pairs the START and END annotations of ProfilerStep#N per
// device, sorted by start.
func (s *Snapshot) stepRanges() map[int][]stepRange {
	open := map[[2]int]int64{} // (device, step) -> start
	out := map[int][]stepRange{}
	for _, a := range s.ExternalAnnotations {
		n, ok := strings.CutPrefix(a.Name, "ProfilerStep#")
		if !ok {
			continue
		}
		var step int
		if _, err := fmt.Sscanf(n, "%d", &step); err != nil {
			continue
		}
		key := [2]int{a.Device, step}
		switch a.Stage {
		case "START":
			open[key] = a.TimeUS
		case "END":
			if st, ok := open[key]; ok && st <= a.TimeUS {
				out[a.Device] = append(out[a.Device], stepRange{start: st, end: a.TimeUS, step: step})
				delete(open, key)
			}
		}
	}
	for _, r := range out {
		sort.Slice(r, func(i, j int) bool { return r[i].start < r[j].start })
	}
	return out
}

// findStep returns the step whose window holds t, or -1.
func findStep(r []stepRange, t int64) int {
	i := sort.Search(len(r), func(i int) bool { return r[i].start > t }) - 1
	if i >= 0 && t <= r[i].end {
		return r[i].step
	}
	return -1
}

// OOMs lists the out-of-memory entries of the device traces.
func (s *Snapshot) OOMs() []OOMEvent {
	var out []OOMEvent
	for dev, tr := range s.DeviceTraces {
		for i, e := range tr.All() {
			if e.Action == ActionOOM {
				out = append(out, OOMEvent{
					Device: dev, TimeUS: e.TimeUS, RequestedBytes: e.Size,
					DeviceFreeBytes: e.DeviceFree, Stream: e.Stream, Site: UserFrame(e.Frames),
					State: s.StateAtOOM(dev, i),
				})
			}
		}
	}
	return out
}

// FormatSegmentMap prints the top segments (all when top <= 0) as text,
// one line per segment, like `python -m torch.cuda._memory_viz stats`.
func FormatSegmentMap(fills []SegmentFill, top int) string {
	var sb strings.Builder
	n := len(fills)
	if top > 0 && top < n {
		n = top
	}
	for _, f := range fills[:n] {
		stream := ""
		if f.Stream != 0 {
			stream = fmt.Sprintf(" stream %#x", f.Stream)
		}
		exp := ""
		if f.Expandable {
			exp = " expandable"
		}
		fmt.Fprintf(&sb, "[%s] %9s %-5s dev %d %#x: %s allocated, %s free (largest %s)%s%s\n",
			f.Bar, memtimeline.FormatBytes(f.TotalSize), f.SegmentType, f.Device, f.Address,
			memtimeline.FormatBytes(f.AllocatedBytes), memtimeline.FormatBytes(f.FreeBytes), memtimeline.FormatBytes(f.LargestFreeBlock), stream, exp)
	}
	if n < len(fills) {
		fmt.Fprintf(&sb, "... %d smaller segments not shown\n", len(fills)-n)
	}
	return sb.String()
}

// WithStepClock returns a copy of s whose history is cut into steps by a
// per-step log's clock instead of the ProfilerStep annotations: step
// steps[i] ends at endsUS[i] (epoch microseconds, the clock time_us is
// on) and starts where the step before it ended (the first at the start
// of the history: setup counts with it). The profiler annotates only the
// steps it profiled, and none at all when it is off; a step log (the
// snippet's steps.jsonl, written after every step) covers the whole run.
// Only the annotations are replaced; the recorded history is shared.
func (s *Snapshot) WithStepClock(steps, endsUS []int64) *Snapshot {
	c := *s
	c.ExternalAnnotations = nil
	for dev, tr := range s.DeviceTraces {
		if tr.Len() == 0 {
			continue
		}
		start := int64(0)
		for i, st := range steps {
			end := endsUS[i]
			if end < start || st < 0 || st > 1<<31 {
				continue
			}
			name := fmt.Sprintf("ProfilerStep#%d", st)
			c.ExternalAnnotations = append(c.ExternalAnnotations,
				Annotation{Device: dev, Name: name, Stage: "START", TimeUS: start},
				Annotation{Device: dev, Name: name, Stage: "END", TimeUS: end})
			start = end + 1
		}
	}
	return &c
}
