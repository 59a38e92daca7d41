package rules

// The field's checklist for GPU memory in training, item by item, with
// what these inputs could tell: pass, fail, or not measurable (and what to
// record to measure it). It reads the analyses and findings already made,
// so a clean run shows what was verified, not only what went wrong.

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/leak"
)

// Checklist statuses.
const (
	CheckPass          = "pass"
	CheckFail          = "fail"
	CheckNotMeasurable = "not measurable"
)

// CheckItem is one line of the checklist.
type CheckItem struct {
	ID     string `json:"id"`
	Item   string `json:"item"`
	Status string `json:"status"`
	// Detail says what was found (the figure, the line) or why it cannot
	// be told; Record what to record to measure it.
	Detail string `json:"detail"`
	Record string `json:"record,omitempty"`
	// Rules are the rule ids behind the item.
	Rules []string `json:"rules,omitempty"`
}

// What to record, per missing input.
const (
	recordTrace    = "a profiler trace with profile_memory=True over at least 3 steps (torchmem snippet: TorchMemProfile does it)"
	recordTimeline = "a profiler trace with activities=[CPU, CUDA] and a schedule, so steps and GPU work are in it (torchmem snippet)"
	recordStepLog  = "torch.cuda.memory_stats() after every step (the snippet's <run>.steps.jsonl), or torch.cuda.memory_summary() in the log every 100 steps"
)

// Checklist evaluates the checklist for one run and rank from its inputs
// and the findings made on them (findings of other inputs are ignored).
func Checklist(v Verdict, fs []Finding) []CheckItem {
	c := newChecklist(v, fs)
	c.leakItems()
	c.allocationItems()
	c.timelineItems()
	c.logsItem()
	return c.out
}

// checklist is the checklist being made for one verdict: its inputs by
// what they recorded, the findings on them by rule, and the items so far.
type checklist struct {
	v     Verdict
	fired map[string][]Finding
	// traces are the verdict's traces; withMemory those with GPU memory
	// events, withDevice those with GPU activity in ProfilerSteps.
	traces, withMemory, withDevice []*Input
	stepLog                        bool // a per-step memory log is among the inputs
	out                            []CheckItem
}

func newChecklist(v Verdict, fs []Finding) *checklist {
	c := &checklist{v: v, fired: map[string][]Finding{}}
	mine := map[string]bool{}
	for _, s := range v.Sources {
		mine[s] = true
	}
	for _, in := range v.Inputs {
		mine[in.Source] = true
	}
	for _, f := range fs {
		if mine[f.Source] {
			c.fired[f.Rule] = append(c.fired[f.Rule], f)
		}
	}
	for _, in := range v.Inputs {
		switch {
		case in.Is(SourceTrace):
			c.traces = append(c.traces, in)
			if in.Frag().Verdict != frag.VerdictUnknown {
				c.withMemory = append(c.withMemory, in)
			}
			if in.hasGPUSteps() {
				c.withDevice = append(c.withDevice, in)
			}
		case in.hasSteps():
			c.stepLog = true
		}
	}
	return c
}

// first is the first finding of rule id on the verdict's inputs.
func (c *checklist) first(id string) (Finding, bool) {
	if l := c.fired[id]; len(l) > 0 {
		return l[0], true
	}
	return Finding{}, false
}

// findingPlace names a finding's place for an item's detail: its line, else its
// operator.
func findingPlace(f Finding) string {
	if f.Location != nil {
		return " at " + f.Location.String()
	}
	if f.Operator != "" {
		return " (" + f.Operator + ")"
	}
	return ""
}

func (c *checklist) add(it CheckItem) { c.out = append(c.out, it) }

// leakItems: leaks, zero_grad, and the causes the field names.
func (c *checklist) leakItems() {
	v := c.v
	kinds := map[string]bool{}
	for _, in := range c.traces {
		for _, l := range in.Leaks().Leaks {
			kinds[l.Kind] = true
		}
	}
	if v.Leak.Kind != "" {
		kinds[v.Leak.Kind] = true
	}
	for _, e := range v.Leak.Evidence {
		if e.leakCause.Kind != "" {
			kinds[e.leakCause.Kind] = true
		}
	}
	leakItem := CheckItem{ID: "leak", Item: "No memory kept step over step (leak)", Rules: []string{RuleLeak, "snapshot.leak", "steps.growth", "smi.leak"}}
	switch v.Leak.Verdict {
	case leak.VerdictLeak:
		leakItem.Status = CheckFail
		leakItem.Detail = v.Leak.Figure()
		if v.Leak.Kind != "" {
			leakItem.Detail += " (" + v.Leak.Kind + ")"
		}
		if v.Leak.Location != nil {
			leakItem.Detail += " at " + v.Leak.Location.String()
		}
	case leak.VerdictClean:
		leakItem.Status, leakItem.Detail = CheckPass, v.Leak.Reason
	default:
		leakItem.Status, leakItem.Detail, leakItem.Record = CheckNotMeasurable, v.Leak.Reason, recordTrace+"; or "+recordStepLog
	}
	c.add(leakItem)
	measured := v.Leak.Verdict == leak.VerdictLeak || v.Leak.Verdict == leak.VerdictClean
	kindItem := func(id, item, why string, bad ...string) {
		it := CheckItem{ID: id, Item: item, Rules: []string{RuleLeak, "snapshot.leak"}}
		for _, k := range bad {
			if kinds[k] {
				it.Status, it.Detail = CheckFail, why
				if v.Leak.Verdict == leak.VerdictLeak && v.Leak.Kind == k && v.Leak.Fix != "" {
					// One wording of the fix: the verdict's.
					it.Detail = fmt.Sprintf("the run's leak (%s, %s) is of this kind: the verdict gives its fix", v.Leak.Figure(), k)
				}
				c.add(it)
				return
			}
		}
		switch {
		case v.Leak.Verdict == leak.VerdictLeak && len(kinds) == 0:
			// A leak whose sources do not tell its kind (a steps log, a
			// trace without Addr) is not "no leak of this kind".
			it.Status, it.Detail, it.Record = CheckNotMeasurable, "the leak's kind is not recorded: nothing among the inputs says which tensors stay", recordTrace
		case measured:
			it.Status, it.Detail = CheckPass, "no leak of this kind"
		default:
			it.Status, it.Detail, it.Record = CheckNotMeasurable, "the leak verdict is unknown", recordTrace
		}
		c.add(it)
	}
	c.zeroGradItem()
	kindItem("eval-no-grad", "No autograd graph kept across steps (evaluation without torch.no_grad(), losses kept with their graph)",
		"outputs kept with their autograd graph: evaluate under torch.no_grad(), keep loss.item() or .detach()", leak.KindAutogradGraph, leak.KindRetainGraph)
	kindItem("kept-in-lists", "No tensors kept in a list or cache", "tensors appended to a container step after step: keep .detach().cpu() copies or bound the list", leak.KindContainer)
}

// zeroGradItem: gradients reset between optimizer steps.
func (c *checklist) zeroGradItem() {
	zg := CheckItem{ID: "zero-grad", Item: "Gradients reset between optimizer steps (zero_grad)", Rules: []string{ruleMissingZeroGrad}}
	if f, ok := c.first(ruleMissingZeroGrad); ok {
		zg.Status, zg.Detail = CheckFail, f.Title+findingPlace(f)
	} else {
		pairs, steps := 0, 0
		for _, in := range c.traces {
			rep := in.ZeroGrad()
			pairs += len(rep.Intervals)
			steps += rep.OptimizerSteps
		}
		switch {
		case pairs > 0:
			zg.Status, zg.Detail = CheckPass, fmt.Sprintf("%d optimizer steps, gradients reset between each pair", steps)
		case len(c.traces) == 0:
			zg.Status, zg.Detail, zg.Record = CheckNotMeasurable, "no profiler trace", recordTrace
		default:
			zg.Status, zg.Detail, zg.Record = CheckNotMeasurable, fmt.Sprintf("%d optimizer %s in the window: two are needed (Optimizer.step# annotations of a torch.optim optimizer)", steps, fmtutil.Plural(float64(steps), "step", "steps")),
				"a profiled window spanning at least two optimizer steps"
		}
	}
	c.add(zg)
}

// allocationItems: the allocation pattern (small blocks, fragmentation,
// large and dominant operators).
func (c *checklist) allocationItems() {
	traceItem := func(id, item, rule string, pass func() (string, bool)) {
		it := CheckItem{ID: id, Item: item, Rules: []string{rule}}
		switch f, ok := c.first(rule); {
		case ok:
			it.Status, it.Detail = CheckFail, f.Title+findingPlace(f)
		case len(c.withMemory) == 0:
			it.Status, it.Detail, it.Record = CheckNotMeasurable, "no trace with GPU memory events", recordTrace
		default:
			d, ok := pass()
			it.Status, it.Detail = CheckPass, d
			if !ok {
				it.Status, it.Record = CheckNotMeasurable, recordTrace
			}
		}
		c.add(it)
	}
	traceItem("small-alloc-flood", "No flood of 4 KB allocations", frag.SmallAllocFlood, func() (string, bool) {
		sa := c.withMemory[0].Frag().SmallAllocs
		return fmt.Sprintf("%.0f allocations of <= %s per step (%.0f%% of all)", sa.PerStep, memtimeline.FormatBytes(sa.MaxBytes), 100*sa.Fraction), true
	})
	// Fragmentation by what it cost (fragcost.go): the verdict's answer.
	fr := CheckItem{ID: "fragmentation-cost", Item: "No fragmentation that costs (cudaMalloc retries, an OOM with the bytes free in the cache, split memory over the headroom, reserved growing while allocated is flat)", Rules: []string{ruleSnapshotSplit, frag.ReservedGap}}
	switch f := c.v.Frag; {
	case f == nil || f.Verdict == frag.VerdictUnknown || f.Cost == "":
		fr.Status, fr.Detail, fr.Record = CheckNotMeasurable, "nothing records the allocator's retries or split memory", recordStepLog
	case f.Verdict == frag.VerdictFragmented:
		fr.Status, fr.Detail = CheckFail, "cost: "+f.Cost
	default:
		fr.Status, fr.Detail = CheckPass, f.Cost
	}
	c.add(fr)
	traceItem("op-self-1gb", "No operator over 1 GB Self CUDA Mem per step", ruleOpSelfPerStep, func() (string, bool) {
		return "every operator under torch's rule of thumb", true
	})
	c.topOpsItem()
}

// topOpsItem: memory.top-ops-share's metric, its finding's words when it
// fired: one rule, one figure.
func (c *checklist) topOpsItem() {
	top := CheckItem{ID: "top-five-ops", Item: "Top five operators' share of allocated bytes (80% or more: start with them)", Rules: []string{ruleOpSelfLimit, "memory.top-ops-share"}}
	if len(c.withMemory) == 0 {
		top.Status, top.Detail, top.Record = CheckNotMeasurable, "no trace with GPU memory events", recordTrace
	} else {
		top.Status = CheckPass
		if f, ok := c.first("memory.top-ops-share"); ok {
			top.Detail = strings.TrimSuffix(f.Title+": "+f.Detail, ".")
		} else if names, n, total := topOpsShare(c.withMemory[0]); total > 0 {
			top.Detail = fmt.Sprintf("%d operators make %.0f%% of allocated bytes: %s allocate %s of %s", len(names), 100*fmtutil.Ratio(n, total), strings.Join(names, ", "), memtimeline.FormatBytes(n), memtimeline.FormatBytes(total))
		} else {
			top.Detail = "the top five operators make less than the rule's share of allocated bytes"
		}
		if f, ok := c.first(ruleOpSelfLimit); ok {
			top.Status, top.Detail = CheckFail, f.Title
		}
	}
	c.add(top)
}

// timelineItems: the GPU timeline (syncs, blocking copies, idle time).
func (c *checklist) timelineItems() {
	gpuItem := func(id, item, rule, passDetail string) {
		it := CheckItem{ID: id, Item: item, Rules: []string{rule}}
		switch f, ok := c.first(rule); {
		case ok:
			it.Status, it.Detail = CheckFail, f.Title+findingPlace(f)
		case len(c.withDevice) == 0:
			it.Status, it.Detail, it.Record = CheckNotMeasurable, "no trace with GPU activity and ProfilerStep windows", recordTimeline
		default:
			it.Status, it.Detail = CheckPass, passDetail
		}
		c.add(it)
	}
	gpuItem("item-every-step", "No loss.item() / .cpu() sync every step", ruleSyncCopy, "no device-to-host copy the host waits for in most steps")
	gpuItem("pinned-non-blocking", "Copies from pinned memory use non_blocking=True", rulePinnedBlocking, "no blocking copy from pinned memory in most steps")
	if f, ok := c.first(rulePageableH2D); ok && c.out[len(c.out)-1].Status == CheckPass {
		c.out[len(c.out)-1].Detail += "; but " + f.Title + ": pin them (gpu.pageable-h2d)"
	}
	gpuItem("gpu-waits-for-data", "GPU not idle waiting for data", ruleIdleGaps, "no idle time with a named cause (data loading, per-step sync, pageable copies) in the median step")
}

// logsItem: memory logged per step.
func (c *checklist) logsItem() {
	logs := CheckItem{ID: "memory-logs", Item: "Memory logged per step (memory_stats / memory_summary)", Rules: []string{"steps.growth"}}
	if c.stepLog {
		logs.Status, logs.Detail = CheckPass, "a per-step memory log is among the inputs"
		if f, ok := c.first("steps.growth"); ok {
			logs.Detail += "; it shows growth: " + f.Title
		}
	} else {
		logs.Status, logs.Detail, logs.Record = CheckNotMeasurable, "no per-step memory log among the inputs", recordStepLog
	}
	c.add(logs)
}

// withoutAddr counts the input's GPU memory events that record no Addr
// (torch < 1.10); 0 for an input read as a digest.
func withoutAddr(in *Input) int64 {
	if !in.Has(SourceTrace) {
		return 0
	}
	return in.Trace.MemorySchema.WithoutAddr
}
