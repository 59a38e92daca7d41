package leak

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

// Leak verdicts.
const (
	VerdictLeak    = "leak"
	VerdictClean   = "clean"
	VerdictUnknown = "unknown"
)

// Leak kinds: why the memory stays.
const (
	// KindContainer: a tensor made each step and kept in a list, dict or
	// cache, with no autograd graph behind it.
	KindContainer = "container"
	// KindAutogradGraph: outputs that require grad kept without a backward
	// (evaluation without torch.no_grad()): their saved activations stay.
	KindAutogradGraph = "autograd_graph"
	// KindRetainGraph: backward ran, yet the tensors it saved survive
	// (backward(retain_graph=True) with the loss or graph kept).
	KindRetainGraph = "retain_graph"
	// KindHook: a hook registered every step; its call count grows.
	KindHook = "hook"
	// KindUnknown: the trace does not say.
	KindUnknown = "unknown"
)

// Options tune the leak detector.
type Options struct {
	Device int // GPU index, -1 all
	// MinBytesPerStep does not decide the verdict: a regular leak is a
	// leak at any size. Findings under it are warnings, at or above it
	// errors.
	MinBytesPerStep int64
	// SteadySteps marks the final steps in the step table (their
	// survivors are the expected ones: gradients, the last outputs).
	SteadySteps int
	// Depth keeps the innermost Depth user frames of each suspect's
	// stack; 0 keeps the whole chain from the outermost frame.
	Depth int
	// MinSteps is how many consecutive steps a site must keep memory in
	// to be a leak (at least 3).
	MinSteps int
}

// DefaultOptions: 3 consecutive steps make a leak; 1 MiB per step or
// more makes it an error.
func DefaultOptions() Options {
	return Options{Device: -1, MinBytesPerStep: 1 << 20, SteadySteps: 2, MinSteps: 3}
}

// StepSurvivors is what one step allocated that was still alive at the end.
type StepSurvivors struct {
	Name           string `json:"name"`
	Number         int64  `json:"number"`
	SurvivorBytes  int64  `json:"survivor_bytes"`
	SurvivorBlocks int64  `json:"survivor_blocks"`
	AllocBytes     int64  `json:"alloc_bytes"`
	// Steady marks the final steps whose survivors are expected.
	Steady bool `json:"steady_state"`
}

// Suspect is a site that keeps memory step after step.
type Suspect struct {
	BytesPerStep int64  `json:"bytes_per_step"`
	Blocks       int64  `json:"blocks"`
	Bytes        int64  `json:"bytes"`
	Operator     string `json:"operator"`
	ForwardOp    string `json:"forward_operator,omitempty"`
	// Stack is the user's call chain, outermost first, down to the
	// allocating frame.
	Stack []string `json:"stack"`
	// Site names the suspect the one way every output names a site.
	Site string `json:"site"`
	// HoldingLine is the frame of the chain that holds the memory: for a
	// graph kept alive, the user's line that called the model (the loop
	// line, "logits = model(vx)"); otherwise the user's allocating line.
	HoldingLine string `json:"holding_line,omitempty"`
	// LineNotRecorded: the holding frame was already running when the
	// profiler started, so the trace names the line it was on then (often
	// the loop's tm.step()), not the call: its function is known, its line
	// is not (an allocator snapshot of the run has it).
	LineNotRecorded bool `json:"line_not_recorded,omitempty"`
	// FirstStep..LastStep are the ProfilerStep numbers of the steps the
	// site kept memory in; -1 when the input has no steps.
	FirstStep int64 `json:"first_step"`
	LastStep  int64 `json:"last_step"`
	// StepsWithSurvivors counts the steps where the site kept blocks.
	StepsWithSurvivors int `json:"steps_with_survivors"`
	// BytesByStep is what the site kept from each step FirstStep..LastStep.
	BytesByStep []int64 `json:"bytes_by_step,omitempty"`
	// Accelerating: the site keeps more every step (hooks piling up).
	Accelerating bool `json:"accelerating,omitempty"`
	// Period > 1: the site keeps memory only every Period-th step
	// (FirstStep, FirstStep+Period, ..., LastStep), RiseBytes each time.
	Period    int64  `json:"period_steps,omitempty"`
	RiseBytes int64  `json:"rise_bytes,omitempty"`
	Kind      string `json:"kind"`
	Evidence  string `json:"evidence"`
	Fix       string `json:"fix"`
	// StackNote says how to read the stack's lines.
	StackNote string `json:"stack_note,omitempty"`
	// copy: the site's blocks are copies of other tensors (clone, to).
	copy bool
	// location is the allocating line as recorded (a snapshot's absolute
	// path), for findings; nil: from the stack (see Location).
	location *site.Location
	// allocPoints is how many code lines made what the site keeps each
	// step (a snapshot site groups a whole model call); 0 counts as 1.
	allocPoints int
	// preProfiled counts the outermost user frames of the chain that were
	// already running when profiling began (traces).
	preProfiled int
	// keptLines: a snapshot site keeping tensors from several lines each
	// step, whose kind (a container or a graph) the snapshot cannot tell.
	keptLines bool
}

// Location is the suspect's allocating line for a finding: as the
// snapshot recorded it (an absolute path), else the innermost user frame
// of its stack; nil when it has none.
func (s *Suspect) Location() *site.Location {
	if s.location != nil {
		return s.location
	}
	return site.LocationOf(s.Stack)
}

// Leak is one leak of an input: its sites share a cause (kind).
type Leak struct {
	Kind         string `json:"kind"`
	BytesPerStep int64  `json:"bytes_per_step"`
	FirstStep    int64  `json:"first_step"`
	LastStep     int64  `json:"last_step"`
	Accelerating bool   `json:"accelerating,omitempty"`
	// Period is the steps between the steps that keep memory: 1 (or 0)
	// every step, 5 for an evaluation every 5th step that keeps its outputs.
	Period int64 `json:"period_steps,omitempty"`
	// AccelerationBytes is how much more is kept each step than the step
	// before, for an accelerating leak.
	AccelerationBytes int64     `json:"acceleration_bytes_per_step,omitempty"`
	Evidence          string    `json:"evidence"`
	Fix               string    `json:"fix"`
	Sites             []Suspect `json:"sites"`
}

// Report is the answer to "does memory creep up step after step?".
type Report struct {
	Verdict            string          `json:"verdict"`
	Reason             string          `json:"reason"`
	GrowthBytesPerStep int64           `json:"growth_bytes_per_step"`
	Steps              []StepSurvivors `json:"steps"`
	// Leaks groups the suspects by cause: one entry per leak.
	Leaks    []Leak    `json:"leaks"`
	Suspects []Suspect `json:"suspects"`
	// UnreleasedBytes are all blocks allocated in the window and alive at
	// its end; PreexistingFrees counts frees of blocks from before it.
	UnreleasedBytes  int64 `json:"unreleased_bytes"`
	UnreleasedBlocks int64 `json:"unreleased_blocks"`
	PreexistingFrees int64 `json:"preexisting_frees"`
	WholeWindow      bool  `json:"whole_window"`
	// StepSeries, for a trace whose events record no Addr, is the
	// allocated bytes at each step's end the verdict reads (noaddr.go).
	StepSeries *StepSeries `json:"step_series,omitempty"`
}

// Kind is the kind of the input's largest leak, "" when it has none.
func (r *Report) Kind() string {
	if len(r.Leaks) == 0 {
		return ""
	}
	return r.Leaks[0].Kind
}

// Data is what the leak analysis of a trace reads: the trace, its
// attribution and its allocations' lifetimes on the analysed device. The
// two are the expensive passes over all memory events, so they are given
// as accessors (rules.Input's cached ones), called once each and only
// when the trace has GPU memory events.
type Data struct {
	Trace       *chrometrace.Trace
	Attribution func() *chrometrace.Attribution
	Lifetimes   func() []memtimeline.Lifetime
}

// TraceData reads a trace on its own (device -1: all GPUs), for a caller
// without a shared rules.Input.
func TraceData(t *chrometrace.Trace, device int) Data {
	return Data{
		Trace:       t,
		Attribution: func() *chrometrace.Attribution { return chrometrace.Attribute(t) },
		Lifetimes:   func() []memtimeline.Lifetime { return memtimeline.Lifetimes(t, device) },
	}
}

// Analyze pairs allocations with frees and asks which steps leave
// blocks behind. A site that keeps memory from each of at least 3
// consecutive steps, steadily or more each step, is a leak whatever its
// size; memory made once (parameters, optimizer state, accumulated
// gradients) or by the last step or two (outputs, gradients) is not.
func Analyze(d Data, opts Options) Report {
	t := d.Trace
	rep := Report{Steps: []StepSurvivors{}, Suspects: []Suspect{}, Leaks: []Leak{}}
	minSteps := max(3, opts.MinSteps)
	if reason := unreadable(t); reason != "" {
		rep.Verdict = VerdictUnknown
		rep.Reason = reason
		return rep
	}
	if t.MemorySchema.WithoutAddr > 0 {
		// Survivors are blocks paired by address: without Addr (torch
		// before 1.10) no block can be followed from one step to the next.
		// The allocated bytes at each step's end are still a step series
		// (noaddr.go).
		return analyzeWithoutAddr(t, opts, rep)
	}
	lts := d.Lifetimes()
	steps := slices.Clone(t.Steps)
	slices.SortFunc(steps, func(a, b chrometrace.Step) int { return cmp.Compare(a.Start, b.Start) })
	if len(steps) == 0 {
		// One pseudo-step over the whole window.
		rep.WholeWindow = true
		steps = []chrometrace.Step{{Number: -1, Start: -1 << 62, Dur: 1 << 62}}
	}
	// The step containing ts, else the last one started before it (-1:
	// before the first step).
	stepOf := chrometrace.NewStepCursor(steps).Of
	for _, s := range steps {
		name := fmt.Sprintf("ProfilerStep#%d", s.Number)
		if rep.WholeWindow {
			name = "whole window"
		}
		rep.Steps = append(rep.Steps, StepSurvivors{Name: name, Number: s.Number})
	}
	for i := range rep.Steps {
		rep.Steps[i].Steady = i >= len(rep.Steps)-opts.SteadySteps
	}

	attr := d.Attribution()
	// Sites by their number in index (nil: no survivor there).
	index := memtimeline.NewSiteIndex(attr, memtimeline.SiteOptions{Device: opts.Device, Depth: opts.Depth})
	sites, order := rep.collectSurvivors(lts, stepOf, index)

	if rep.WholeWindow {
		rep.wholeWindow(order)
		return rep
	}
	if len(steps) < minSteps {
		rep.Verdict = VerdictUnknown
		rep.Reason = fmt.Sprintf("only %d profiled steps: at least %d are needed to tell a leak from the last steps' outputs (raise active= in the profiler schedule)", len(steps), minSteps)
		return rep
	}
	markRetention(lts, stepOf, index, sites)

	hooks := growingFrames(t, steps, stepOf)
	rep.addSuspects(t, attr, order, steps, stepOf, hooks, minSteps)
	if rep.group(hooks, "stays allocated") {
		return rep
	}
	rep.clean(minSteps)
	return rep
}

// unreadable says why the trace cannot answer (no GPU memory events), ""
// when it can. Events without addresses are read as a step series
// (analyzeWithoutAddr).
func unreadable(t *chrometrace.Trace) string {
	gpuEvents := 0
	for i := range t.Memory {
		if t.Memory[i].DeviceType.IsGPU() {
			gpuEvents++
		}
	}
	if gpuEvents == 0 {
		return "the trace has no GPU memory events: profile with profile_memory=True"
	}
	return ""
}

// collectSurvivors counts each step's allocations and survivors (blocks
// still alive at the end) and what each site kept from each step: sites
// by their number in index (nil: no survivor there), and in order of
// first survivor.
func (rep *Report) collectSurvivors(lts []memtimeline.Lifetime, stepOf func(int64) int, index *memtimeline.SiteIndex) (sites, order []*siteSeries) {
	for _, lt := range lts {
		switch lt.State {
		case memtimeline.Preexisting:
			rep.PreexistingFrees++
			continue
		case memtimeline.Unreleased:
			rep.UnreleasedBytes += lt.Bytes
			rep.UnreleasedBlocks++
		}
		k := stepOf(lt.Start)
		if k < 0 {
			continue
		}
		rep.Steps[k].AllocBytes += lt.Bytes
		if lt.State != memtimeline.Unreleased {
			continue
		}
		rep.Steps[k].SurvivorBytes += lt.Bytes
		rep.Steps[k].SurvivorBlocks++
		key := index.Of(int(lt.Alloc))
		if int(key) >= len(sites) {
			sites = append(sites, make([]*siteSeries, int(key)+1-len(sites))...)
		}
		agg := sites[key]
		if agg == nil {
			agg = &siteSeries{site: index.Site(key), bytes: make([]int64, len(rep.Steps)), blocks: make([]int64, len(rep.Steps)), first: lt.Alloc}
			sites[key] = agg
			order = append(order, agg)
		}
		agg.site.Allocs++
		agg.site.LiveBytesAtEnd += lt.Bytes
		agg.bytes[k] += lt.Bytes
		agg.blocks[k]++
		agg.allocs = append(agg.allocs, lt.Alloc)
	}
	return sites, order
}

// wholeWindow answers a trace without ProfilerSteps: unknown, with every
// site that kept memory to the end as a suspect.
func (rep *Report) wholeWindow(order []*siteSeries) {
	rep.Verdict = VerdictUnknown
	rep.Reason = fmt.Sprintf("no ProfilerStep annotations (profile with a schedule and call prof.step()): the whole window was treated as one step; %s allocated in it is still alive at the end", memtimeline.FormatBytes(rep.UnreleasedBytes))
	for _, a := range order {
		rep.Suspects = append(rep.Suspects, Suspect{Bytes: a.site.LiveBytesAtEnd, Blocks: a.blocks[0], Operator: a.site.Operator, ForwardOp: a.site.ForwardOp,
			Stack: fmtutil.NonNil(a.site.Frames), Site: site.Label(a.site.Frames, a.site.Operator), FirstStep: -1, LastStep: -1, StepsWithSurvivors: 1, Kind: KindUnknown})
	}
	sortSuspects(rep.Suspects)
}

// markRetention records per site the most step boundaries a freed block
// lived across: blocks freed after living across step boundaries tell a
// bounded buffer (kept K steps, then freed) from a leak.
func markRetention(lts []memtimeline.Lifetime, stepOf func(int64) int, index *memtimeline.SiteIndex, sites []*siteSeries) {
	for _, lt := range lts {
		if lt.State != memtimeline.Freed {
			continue
		}
		a, b := stepOf(lt.Start), stepOf(lt.End)
		if a < 0 || b <= a {
			continue
		}
		if key := index.Of(int(lt.Alloc)); int(key) < len(sites) && sites[key] != nil {
			agg := sites[key]
			agg.maxRetention = max(agg.maxRetention, b-a)
		}
	}
}

// addSuspects makes a suspect of every site whose survivors form a
// regular run longer than its retention, with its kind from the autograd
// and hook evidence.
func (rep *Report) addSuspects(t *chrometrace.Trace, attr *chrometrace.Attribution, order []*siteSeries, steps []chrometrace.Step, stepOf func(int64) int, hooks map[string]growingFrame, minSteps int) {
	type cand struct {
		agg *siteSeries
		r   run
	}
	var cands []cand
	for _, a := range order {
		r, ok := regularRun(a.bytes, a.blocks, minSteps)
		if !ok || r.hi-r.lo+1 <= a.maxRetention {
			continue
		}
		cands = append(cands, cand{a, r})
	}
	// The autograd evidence is read only for the sites that leak.
	var graph *graphIndex
	if len(cands) > 0 {
		graph = newGraphIndex(t, attr)
	}
	for _, c := range cands {
		a, r := c.agg, c.r
		a.countGraphBlocks(t, graph, stepOf, r)
		s := Suspect{
			BytesPerStep: r.bytesPerStep, Operator: a.site.Operator, ForwardOp: a.site.ForwardOp,
			Stack: fmtutil.NonNil(a.site.Frames), Site: site.Label(a.site.Frames, a.site.Operator),
			FirstStep: steps[r.lo].Number, LastStep: steps[r.hi].Number, StepsWithSurvivors: r.hi - r.lo + 1,
			BytesByStep: slices.Clone(a.bytes[r.lo : r.hi+1]), Accelerating: r.accelerating,
			Period: int64(r.period), RiseBytes: r.rise,
		}
		for k := r.lo; k <= r.hi; k++ {
			s.Blocks += a.blocks[k]
			s.Bytes += a.bytes[k]
		}
		s.Kind = siteKind(a, hooks, graph.known)
		if n := graph.enteredBeforeProfiling(a.first, steps[0].Start); n > 0 {
			s.preProfiled = n
			s.StackNote = fmt.Sprintf("the outermost %d frame(s) began before profiling started: their line is where profiling began, not the call; Python frames in traces carry their function's def line", n)
		} else {
			s.StackNote = "Python frames in traces carry their function's def line; the allocator snapshot has the allocating line"
		}
		rep.Suspects = append(rep.Suspects, s)
	}
}

// countGraphBlocks sorts the site's survivors from the run's steps by
// their autograd evidence.
func (a *siteSeries) countGraphBlocks(t *chrometrace.Trace, graph *graphIndex, stepOf func(int64) int, r run) {
	for _, i := range a.allocs {
		if k := stepOf(t.Memory[i].TS); k < r.lo || k > r.hi {
			continue
		}
		switch graph.blockKind(int(i)) {
		case blockGraph:
			a.graphBlocks++
		case blockGraphBackwardRan:
			a.graphBlocks++
			a.backwardRanBlocks++
		case blockBackwardMade:
			a.backwardMadeBlocks++
		default:
			a.noGraphBlocks++
		}
	}
}

// clean sets the verdict of a trace without a leak, and says what is
// still alive at the end instead.
func (rep *Report) clean(minSteps int) {
	rep.Verdict = VerdictClean
	lastSurvivors := 0
	var endBytes int64
	for i := len(rep.Steps) - 1; i >= 0 && rep.Steps[i].SurvivorBlocks > 0; i-- {
		lastSurvivors++
		endBytes += rep.Steps[i].SurvivorBytes
	}
	switch {
	case rep.UnreleasedBytes == 0:
		rep.Reason = "no growth: every block allocated in the profiled steps was freed"
	default:
		rep.Reason = fmt.Sprintf("no growth: no site keeps memory from %d consecutive steps; %s still alive at the end was made once or by the last steps (%s from the last %d: outputs, gradients, optimizer state)",
			minSteps, memtimeline.FormatBytes(rep.UnreleasedBytes), memtimeline.FormatBytes(endBytes), lastSurvivors)
	}
}
