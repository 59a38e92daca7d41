package memtimeline

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
)

// What fills memory at one moment (the peak of allocated memory, an
// out-of-memory): the bytes alive then, by the line that allocated them,
// by operator, and by category. A trace has no tensor categories, so they
// are derived from each block's lifetime and the phases it spans: made in
// forward and freed in backward is an activation; made in backward and
// kept past it, a gradient; made in the optimizer step and kept, optimizer
// state; made and freed inside one phase, a temporary. Blocks allocated
// before profiling began are invisible to the trace; the gradients seen in
// backward (one per parameter) and the optimizer's kind split them into
// parameters and optimizer state, as an estimate.

// Categories of a composition, in display order.
const (
	CatParameter      = "parameter"
	CatOptimizerState = "optimizer_state"
	CatGradient       = "gradient"
	CatActivation     = "activation"
	CatTemporary      = "temporary"
	CatUnknown        = "unknown"
)

// CompositionCategories lists the categories in display order.
var CompositionCategories = []string{CatParameter, CatOptimizerState, CatGradient, CatActivation, CatTemporary, CatUnknown}

// Phases of a training step.
const (
	PhaseForward   = "forward"
	PhaseBackward  = "backward"
	PhaseOptimizer = "optimizer"
	PhaseBetween   = "between steps"
)

// BeforeProfiling names the bytes a composition cannot attribute to a
// line or operator: blocks allocated before profiling began.
const BeforeProfiling = "(allocated before profiling)"

// Share is the bytes one line, operator or category holds.
type Share struct {
	Name string `json:"name"`
	// Detail is the operator for a line, an explanation for a category.
	Detail string `json:"detail,omitempty"`
	Bytes  int64  `json:"bytes"`
	Blocks int64  `json:"blocks"`
}

// Composition is what is alive at one moment.
type Composition struct {
	TNs    int64  `json:"t_ns"`
	Device int    `json:"device"`
	Step   string `json:"step,omitempty"`
	// Phase is the step phase the moment falls in.
	Phase string `json:"phase,omitempty"`
	// AllocatedBytes is the allocator's total at that moment; SeenBytes the
	// part allocated inside the profiled window (the rest was allocated
	// before profiling began and has no line or operator).
	AllocatedBytes int64   `json:"allocated_bytes"`
	SeenBytes      int64   `json:"seen_bytes"`
	ByLine         []Share `json:"by_line"`
	ByOperator     []Share `json:"by_operator"`
	ByCategory     []Share `json:"by_category"`
	// Estimated is true: categories are inferred from lifetimes and phases,
	// not from tensors' roles (torch's export_memory_timeline knows those).
	Estimated bool   `json:"estimated"`
	Note      string `json:"note"`
	// Torch is torch's own split at the same moment, from an
	// export_memory_timeline file of the same run, mapped to these
	// categories; Agreement compares the two (1: the same shares).
	Torch     []Share `json:"torch_categories,omitempty"`
	Agreement float64 `json:"agreement,omitempty"`
}

// torchCategory maps export_memory_timeline's categories to a
// composition's, for comparing the two splits only: the batch (INPUT) is
// held like an activation, autograd's bookkeeping (AUTOGRAD_DETAIL) is
// closest to temporary. Torch's split itself is shown in torch's names.
var torchCategory = map[string]string{
	"PARAMETER": CatParameter, "OPTIMIZER_STATE": CatOptimizerState, "INPUT": CatActivation,
	"TEMPORARY": CatTemporary, "ACTIVATION": CatActivation, "GRADIENT": CatGradient,
	"AUTOGRAD_DETAIL": CatTemporary, "Unknown": CatUnknown,
}

// TorchAsComposition folds torch's category split (torch's names) into a
// composition's categories (CompositionCategories order), for comparing.
func TorchAsComposition(torch []Share) []Share {
	by := map[string]int64{}
	for _, s := range torch {
		c := torchCategory[s.Name]
		if c == "" {
			c = CatUnknown
		}
		by[c] += s.Bytes
	}
	out := make([]Share, len(CompositionCategories))
	for k, c := range CompositionCategories {
		out[k] = Share{Name: c, Bytes: by[c]}
	}
	return out
}

// CompareWithTorch sets c.Torch and c.Agreement from torch's own split
// of the same moment: the export_memory_timeline of the same run at c.TNs
// plus the trace's baseTimeNanoseconds (exported.Timeline.SplitAt); false
// when torch is nil (the moment is outside torch's timeline). Torch
// counts tensors only: allocator blocks that are no tensor (cuBLAS
// workspaces) are the difference between the allocator's total and the
// timeline's and sit in the estimate's unknown share, so they are left
// out of the comparison.
func (c *Composition) CompareWithTorch(torch []Share) bool {
	if torch == nil {
		return false
	}
	var total int64
	for _, s := range torch {
		total += s.Bytes
	}
	ours := slices.Clone(c.ByCategory)
	if extra := c.AllocatedBytes - total; extra > 0 {
		for i := range ours {
			if ours[i].Name == CatUnknown {
				ours[i].Bytes -= min(extra, ours[i].Bytes)
			}
		}
	}
	c.Torch, c.Agreement = torch, CategoryAgreement(ours, TorchAsComposition(torch))
	return true
}

// CategoryAgreement is 1 minus the total variation distance between two
// splits as fractions of their totals: 1 when the shares are equal, 0 when
// they share nothing.
func CategoryAgreement(a, b []Share) float64 {
	var ta, tb float64
	bb := map[string]float64{}
	for _, s := range a {
		ta += float64(s.Bytes)
	}
	for _, s := range b {
		tb += float64(s.Bytes)
		bb[s.Name] += float64(s.Bytes)
	}
	if ta == 0 || tb == 0 {
		return 0
	}
	var d float64
	seen := map[string]bool{}
	for _, s := range a {
		seen[s.Name] = true
		d += math.Abs(float64(s.Bytes)/ta - bb[s.Name]/tb)
	}
	for name, v := range bb {
		if !seen[name] {
			d += v / tb
		}
	}
	return 1 - d/2
}

// PeakComposition is the composition at the moment allocated memory
// peaked on device (-1: the device with the highest peak); nil without
// GPU memory events.
func PeakComposition(t *chrometrace.Trace, attr *chrometrace.Attribution, lts []Lifetime, device int) *Composition {
	if device < 0 {
		var best int64 = -1
		for i := range t.Memory {
			e := &t.Memory[i]
			if e.DeviceType.IsGPU() && e.TotalAllocated > best {
				best, device = e.TotalAllocated, int(e.DeviceID)
			}
		}
		if device < 0 {
			return nil
		}
	}
	_, ts := PeakAllocated(t, device)
	if ts < 0 {
		return nil
	}
	return CompositionAt(t, attr, lts, device, ts)
}

// phaseIndex classifies memory events by phase (blockPhase), once per
// operator chain: a trace repeats a few thousand chains over millions of
// blocks.
type phaseIndex struct {
	attr    *chrometrace.Attribution
	byChain map[int32]string
}

func newPhaseIndex(attr *chrometrace.Attribution) *phaseIndex {
	return &phaseIndex{attr: attr, byChain: map[int32]string{}}
}

// of is blockPhase(attr, i).
func (p *phaseIndex) of(i int) string {
	if p.attr.Events[i].Forward >= 0 {
		return PhaseBackward
	}
	_, chain := p.attr.SiteNodes(i) // equal nodes, equal OpChain
	ph, ok := p.byChain[chain]
	if !ok {
		ph = blockPhase(p.attr, i)
		p.byChain[chain] = ph
	}
	return ph
}

// blockPhase classifies where memory event i happened.
func blockPhase(attr *chrometrace.Attribution, i int) string {
	if attr.Events[i].Forward >= 0 {
		return PhaseBackward
	}
	chain := attr.OpChain(i)
	for _, op := range chain {
		switch {
		case strings.HasPrefix(op, "Optimizer.step#"), strings.HasPrefix(op, "Optimizer.zero_grad#"):
			return PhaseOptimizer
		case strings.HasPrefix(op, "autograd::engine::evaluate_function"):
			return PhaseBackward
		}
	}
	return PhaseForward
}

// phaseAt says which phase ts falls in: inside an optimizer op, inside
// (or between) backward ops of one step, else forward inside a step and
// between steps outside. One pass over the ops, each name classified
// once: a large trace has hundreds of thousands of backward ops, which
// were listed first.
func phaseAt(t *chrometrace.Trace, ts int64) string {
	stepStart, stepEnd := int64(-1), int64(-1)
	for _, s := range t.Steps {
		if s.Start <= ts && ts <= s.End() {
			stepStart, stepEnd = s.Start, s.End()
		}
	}
	const (
		other = iota
		optimizer
		backward
	)
	kind := make([]uint8, len(t.Strings))
	for i, name := range t.Strings {
		switch {
		case strings.HasPrefix(name, "Optimizer.step#"), strings.HasPrefix(name, "Optimizer.zero_grad#"):
			kind[i] = optimizer
		case strings.HasPrefix(name, "autograd::engine::evaluate_function"):
			kind[i] = backward
		}
	}
	var bwdFirst, bwdLast int64 = -1, -1
	for i := range t.HostOps {
		op := &t.HostOps[i]
		switch kind[op.Name] {
		case optimizer:
			if op.Start <= ts && ts <= op.End() {
				return PhaseOptimizer
			}
		case backward:
			if start, end := op.Start, op.End(); stepStart < 0 || (start >= stepStart && end <= stepEnd) {
				if bwdFirst < 0 || start < bwdFirst {
					bwdFirst = start
				}
				bwdLast = max(bwdLast, end)
			}
		}
	}
	if len(t.Steps) > 0 && stepStart < 0 {
		return PhaseBetween
	}
	if bwdFirst >= 0 && ts >= bwdFirst && ts <= bwdLast {
		return PhaseBackward
	}
	return PhaseForward
}

// CompositionAt returns what is alive on device at ts (the state right
// after the memory events at ts).
func CompositionAt(t *chrometrace.Trace, attr *chrometrace.Attribution, lts []Lifetime, device int, ts int64) *Composition {
	c := &Composition{TNs: ts, Device: device, Estimated: true}
	// The allocator's total right after ts: the last event at or before ts.
	var lastTS int64 = -1 << 62
	for i := range t.Memory {
		e := &t.Memory[i]
		if e.DeviceType.IsGPU() && int(e.DeviceID) == device && e.TS <= ts && e.TS >= lastTS {
			lastTS, c.AllocatedBytes = e.TS, e.TotalAllocated
		}
	}
	for _, s := range t.Steps {
		if s.Start <= ts && ts <= s.End() {
			c.Step = fmt.Sprintf("ProfilerStep#%d", s.Number)
		}
	}
	c.Phase = phaseAt(t, ts)
	if n := t.MemorySchema.WithoutAddr; n > 0 {
		// Without Addr (torch < 1.10) no block is followed to its free:
		// what is alive, by line, operator or category, is not recorded.
		c.ByLine, c.ByOperator, c.ByCategory, c.Estimated = []Share{}, []Share{}, []Share{}, false
		c.Note = fmt.Sprintf("%d memory events record no Addr (torch before 1.10): what is alive at this moment, by line, operator or category, is not recorded", n)
		if t.MemorySchema.DerivedAllocated {
			c.Note += "; the allocated figure is the running sum of the window's events, relative to its start"
		}
		return c
	}

	lines := map[string]*Share{}
	ops := map[string]*Share{}
	cats := map[string]*Share{}
	for _, k := range CompositionCategories {
		cats[k] = &Share{Name: k}
	}
	// Gradient bytes made in one backward pass estimate the parameters'
	// size (one gradient per trainable parameter).
	gradPerStep := map[int]int64{}
	stepOf := containingStep(t.Steps)
	hasBackward := false
	phases := newPhaseIndex(attr)
	// Lines and operators of the blocks alive at ts, named once per site.
	type named struct{ where, op string }
	siteIndex := NewSiteIndex(attr, SiteOptions{Device: device, Depth: 1})
	var names []named
	var beforeFreed int64 // allocated before profiling, alive at ts, freed later
	for _, lt := range lts {
		if int(lt.Device) != device {
			continue
		}
		if lt.Alloc < 0 {
			if lt.End > ts {
				beforeFreed += lt.Bytes
				cats[categorizeBefore(phases.of(int(lt.Free)))].Bytes += lt.Bytes
			}
			continue
		}
		allocPhase := phases.of(int(lt.Alloc))
		freePhase := ""
		if lt.Free >= 0 {
			freePhase = phases.of(int(lt.Free))
		}
		cat := categorize(allocPhase, freePhase, lt.Free >= 0 && stepOf(lt.Start) == stepOf(lt.End))
		if allocPhase == PhaseBackward {
			hasBackward = true
		}
		if cat == CatGradient {
			gradPerStep[stepOf(lt.Start)] += lt.Bytes
		}
		if lt.Start > ts || (lt.End >= 0 && lt.End <= ts) {
			continue
		}
		c.SeenBytes += lt.Bytes
		add := func(m map[string]*Share, name, detail string) {
			s := m[name]
			if s == nil {
				s = &Share{Name: name, Detail: detail}
				m[name] = s
			}
			s.Bytes += lt.Bytes
			s.Blocks++
		}
		k := siteIndex.Of(int(lt.Alloc))
		if int(k) == len(names) {
			site := siteIndex.Site(k)
			where := chrometrace.InnermostFrame(site.Frames)
			op := site.Operator
			if i := strings.Index(op, " > "); i >= 0 {
				op = op[:i]
			}
			if op == "" {
				op = "(no operator)"
			}
			if site.ForwardOp != "" && !strings.HasPrefix(op, "autograd::") {
				op += " (backward of " + site.ForwardOp + ")"
			}
			names = append(names, named{where, op})
		}
		add(lines, names[k].where, names[k].op)
		add(ops, names[k].op, "")
		add(cats, cat, "")
	}
	before := max(0, c.AllocatedBytes-c.SeenBytes)
	if before > 0 {
		lines[BeforeProfiling] = &Share{Name: BeforeProfiling, Bytes: before}
		ops[BeforeProfiling] = &Share{Name: BeforeProfiling, Bytes: before}
		// What is never freed in the window: parameters, optimizer state,
		// workspaces (cuBLAS), anything kept from before.
		kept := max(0, before-beforeFreed)
		param, state := splitBeforeWindow(t, kept, gradPerStep, hasBackward)
		cats[CatParameter].Bytes += param
		cats[CatOptimizerState].Bytes += state
		cats[CatUnknown].Bytes += kept - param - state
	}
	c.ByLine = SortedShares(lines)
	c.ByOperator = SortedShares(ops)
	for _, k := range CompositionCategories {
		c.ByCategory = append(c.ByCategory, *cats[k])
	}
	c.Note = "categories are estimated from block lifetimes and step phases (made in forward and freed in backward: activation; made in backward and kept: gradient; made in the optimizer step and kept: optimizer state; made and freed in one phase: temporary)"
	if before > 0 {
		c.Note += fmt.Sprintf("; %s was allocated before profiling began and is split into parameters (the size of one step's gradients) and optimizer state (%s)", FormatBytes(before), optimizerName(t))
	}
	return c
}

// categorize names a block's role from where it was made and freed
// (freePhase "" when it is never freed in the window). Torch's own
// timeline calls whatever forward makes and keeps past the forward an
// activation (a kept output, a cached clone): so does this.
func categorize(allocPhase, freePhase string, sameStep bool) string {
	switch allocPhase {
	case PhaseOptimizer:
		if freePhase == PhaseOptimizer && sameStep {
			return CatTemporary
		}
		return CatOptimizerState
	case PhaseBackward:
		if freePhase == PhaseBackward && sameStep {
			return CatTemporary
		}
		return CatGradient
	default:
		if freePhase == PhaseForward && sameStep {
			return CatTemporary
		}
		return CatActivation
	}
}

// categorizeBefore names a block allocated before profiling from where it
// was freed: gradients are freed by zero_grad (or the optimizer), saved
// activations by backward.
func categorizeBefore(freePhase string) string {
	switch freePhase {
	case PhaseOptimizer:
		return CatGradient
	case PhaseBackward, PhaseForward:
		return CatActivation
	}
	return CatUnknown
}

// optimizerStateFactor is the optimizer state per parameter byte, from the
// optimizer's name in the trace (Optimizer.step#Adam.step).
func optimizerStateFactor(t *chrometrace.Trace) (string, int64) {
	name := optimizerName(t)
	switch {
	case strings.Contains(name, "Adam"), strings.Contains(name, "Lamb"):
		return name, 2
	case strings.Contains(name, "SGD"):
		// Momentum keeps one buffer per parameter, updated with mul_.
		if optimizerCalls(t, "mul_") {
			return name, 1
		}
		return name, 0
	case strings.Contains(name, "RMSprop"), strings.Contains(name, "Adagrad"), strings.Contains(name, "Lion"):
		return name, 1
	case name == "":
		return "", 0
	}
	return name, 1
}

// optimizerCalls reports whether an operator whose name contains op runs
// inside an optimizer step.
func optimizerCalls(t *chrometrace.Trace, op string) bool {
	var steps []*chrometrace.HostOp
	for i := range t.HostOps {
		if strings.HasPrefix(t.Str(t.HostOps[i].Name), "Optimizer.step#") {
			steps = append(steps, &t.HostOps[i])
		}
	}
	for i := range t.HostOps {
		o := &t.HostOps[i]
		if !strings.Contains(t.Str(o.Name), op) {
			continue
		}
		for _, s := range steps {
			if s.Thread == o.Thread && s.Start <= o.Start && o.End() <= s.End() {
				return true
			}
		}
	}
	return false
}

func optimizerName(t *chrometrace.Trace) string {
	for i := range t.HostOps {
		n := t.Str(t.HostOps[i].Name)
		if rest, ok := strings.CutPrefix(n, "Optimizer.step#"); ok {
			if j := strings.IndexByte(rest, '.'); j >= 0 {
				rest = rest[:j]
			}
			return rest
		}
	}
	return ""
}

// containingStep returns a function giving the index of the first step
// of steps (file order) whose window contains ts, -1 for none. Steps that
// do not overlap, as the profiler writes them, are searched by start time
// (a trace has hundreds of steps and a lifetime asks twice); overlapping
// ones, in order.
func containingStep(steps []chrometrace.Step) func(ts int64) int {
	byStart := make([]int, len(steps))
	for k := range byStart {
		byStart[k] = k
	}
	slices.SortStableFunc(byStart, func(a, b int) int { return cmp.Compare(steps[a].Start, steps[b].Start) })
	for i := 1; i < len(byStart); i++ {
		if steps[byStart[i]].Start <= steps[byStart[i-1]].End() {
			return func(ts int64) int {
				for k, s := range steps {
					if s.Start <= ts && ts <= s.End() {
						return k
					}
				}
				return -1
			}
		}
	}
	return func(ts int64) int {
		// The last step starting at or before ts is the only one that may
		// contain it.
		i, _ := slices.BinarySearchFunc(byStart, ts, func(k int, ts int64) int { return cmp.Compare(steps[k].Start, ts+1) })
		if i == 0 {
			return -1
		}
		if k := byStart[i-1]; ts <= steps[k].End() {
			return k
		}
		return -1
	}
}

// splitBeforeWindow splits memory allocated before profiling into
// parameters and optimizer state: parameters are as large as one step's
// gradients; Adam-like optimizers keep two states per parameter, SGD with
// momentum one. Without gradients (inference) it stays unknown.
func splitBeforeWindow(t *chrometrace.Trace, before int64, gradPerStep map[int]int64, hasBackward bool) (param, state int64) {
	if !hasBackward {
		return 0, 0 // no gradients to size the parameters by
	}
	var grads int64
	for k, b := range gradPerStep {
		if k >= 0 {
			grads = max(grads, b)
		}
	}
	if grads == 0 {
		return 0, 0
	}
	param = min(before, grads)
	_, f := optimizerStateFactor(t)
	state = min(before-param, f*grads)
	return param, state
}

// SortedShares lists m's shares, largest first (then by name).
func SortedShares(m map[string]*Share) []Share {
	out := make([]Share, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Share) int { return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Name, b.Name)) })
	return out
}

// HolderSample is what held the most memory at one moment: the top lines
// with their bytes, for a chart's tooltip.
type HolderSample struct {
	TNs   int64
	Lines []Share
}

// HolderSamples returns, at up to n moments spread over the trace (and at
// the peak), the top lines alive on device. One sweep over the block
// lifetimes: each moment costs a pass over the sites, not the blocks.
func HolderSamples(t *chrometrace.Trace, attr *chrometrace.Attribution, lts []Lifetime, device, n, top int) []HolderSample {
	type ev struct {
		ts    int64
		bytes int64
		site  int
	}
	siteIdx := map[string]int{}
	var siteNames []string
	index := NewSiteIndex(attr, SiteOptions{Device: device, Depth: 1})
	var kOf []int // per site of index: its line's number in siteNames
	var evs []ev
	var lo, hi int64 = 1 << 62, -1 << 62
	for _, lt := range lts {
		if int(lt.Device) != device || lt.Alloc < 0 {
			continue
		}
		j := index.Of(int(lt.Alloc))
		if int(j) == len(kOf) {
			s := index.Site(j)
			name := chrometrace.InnermostFrame(s.Frames)
			k, ok := siteIdx[name]
			if !ok {
				k = len(siteNames)
				siteIdx[name] = k
				siteNames = append(siteNames, name)
			}
			kOf = append(kOf, k)
		}
		k := kOf[j]
		evs = append(evs, ev{lt.Start, lt.Bytes, k})
		lo, hi = min(lo, lt.Start), max(hi, lt.Start)
		if lt.End >= 0 {
			evs = append(evs, ev{lt.End, -lt.Bytes, k})
			hi = max(hi, lt.End)
		}
	}
	if len(evs) == 0 || n <= 0 {
		return nil
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return cmp.Compare(a.ts, b.ts) })
	times := make([]int64, 0, n+1)
	for i := 0; i < n; i++ {
		times = append(times, lo+(hi-lo)*int64(i)/int64(max(1, n-1)))
	}
	if _, peak := PeakAllocated(t, device); peak >= 0 {
		times = append(times, peak)
	}
	slices.Sort(times)
	times = slices.Compact(times)
	alive := make([]int64, len(siteNames))
	var out []HolderSample
	j := 0
	for _, ts := range times {
		for j < len(evs) && evs[j].ts <= ts {
			alive[evs[j].site] += evs[j].bytes
			j++
		}
		var shares []Share
		for k, b := range alive {
			if b > 0 {
				shares = append(shares, Share{Name: siteNames[k], Bytes: b})
			}
		}
		slices.SortFunc(shares, func(a, b Share) int { return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Name, b.Name)) })
		out = append(out, HolderSample{TNs: ts, Lines: shares[:min(top, len(shares))]})
	}
	return out
}

// BlockSize is the caching allocator's block for a request: rounded up
// to 512 bytes, as "allocated" counts it (a history records the request).
func BlockSize(n int64) int64 { return (n + 511) / 512 * 512 }
