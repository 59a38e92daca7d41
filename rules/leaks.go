package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// Leak verdicts.
const (
	VerdictLeak    = "leak"
	VerdictClean   = "clean"
	VerdictUnknown = "unknown"
)

// LeakOptions tune the leak detector.
type LeakOptions struct {
	Device int // GPU index, -1 all
	// MinBytesPerStep is the smallest growth called a leak.
	MinBytesPerStep int64
	// SteadySteps is how many final steps may legitimately keep blocks
	// alive (gradients, a rolling buffer, the last step's outputs).
	SteadySteps int
	// Depth of the Python stacks that key suspects (innermost frames).
	Depth int
}

// DefaultLeakOptions: growth of 1 MiB per step or more is a leak; the last
// two steps are steady state.
func DefaultLeakOptions() LeakOptions {
	return LeakOptions{Device: -1, MinBytesPerStep: 1 << 20, SteadySteps: 2, Depth: 5}
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

// LeakSuspect is a site that keeps adding blocks step after step.
type LeakSuspect struct {
	BytesPerStep int64    `json:"bytes_per_step"`
	Blocks       int64    `json:"blocks"`
	Bytes        int64    `json:"bytes"`
	Operator     string   `json:"operator"`
	ForwardOp    string   `json:"forward_operator,omitempty"`
	Stack        []string `json:"stack"`
	FirstStep    int64    `json:"first_step"`
	LastStep     int64    `json:"last_step"`
	// StepsWithSurvivors counts the steps where the site kept blocks.
	StepsWithSurvivors int `json:"steps_with_survivors"`
}

// LeakReport is the answer to "does memory creep up step after step?".
type LeakReport struct {
	Verdict            string          `json:"verdict"`
	Reason             string          `json:"reason"`
	GrowthBytesPerStep int64           `json:"growth_bytes_per_step"`
	Steps              []StepSurvivors `json:"steps"`
	Suspects           []LeakSuspect   `json:"suspects"`
	// UnreleasedBytes are all blocks allocated in the window and alive at
	// its end; PreexistingFrees counts frees of blocks from before it.
	UnreleasedBytes  int64 `json:"unreleased_bytes"`
	UnreleasedBlocks int64 `json:"unreleased_blocks"`
	PreexistingFrees int64 `json:"preexisting_frees"`
	WholeWindow      bool  `json:"whole_window"`
}

// AnalyzeLeaks pairs allocations with frees and asks which steps leave
// blocks behind. A correct loop leaves survivors only from its last step
// or two; a leak leaves some from (nearly) every earlier step, at the same
// site each time.
func AnalyzeLeaks(t *chrometrace.Trace, opts LeakOptions) LeakReport {
	rep := LeakReport{Steps: []StepSurvivors{}, Suspects: []LeakSuspect{}}
	gpuEvents := 0
	for i := range t.Memory {
		if t.Memory[i].DeviceType.IsGPU() {
			gpuEvents++
		}
	}
	if gpuEvents == 0 {
		rep.Verdict = VerdictUnknown
		rep.Reason = "the trace has no GPU memory events: profile with profile_memory=True"
		return rep
	}
	lts := memtimeline.Lifetimes(t, opts.Device)
	steps := slices.Clone(t.Steps)
	slices.SortFunc(steps, func(a, b chrometrace.Step) int { return cmp.Compare(a.Start, b.Start) })
	if len(steps) == 0 {
		// One pseudo-step over the whole window.
		rep.WholeWindow = true
		steps = []chrometrace.Step{{Number: -1, Start: -1 << 62, Dur: 1 << 62}}
	}
	stepOf := func(ts int64) int {
		// The step containing ts, else the last one started before it.
		k, _ := slices.BinarySearchFunc(steps, ts, func(s chrometrace.Step, ts int64) int { return cmp.Compare(s.Start, ts+1) })
		return k - 1 // -1: before the first step
	}
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

	attr := chrometrace.Attribute(t)
	type siteAgg struct {
		site    memtimeline.Site
		perStep map[int]int64
		blocks  int64
		bytes   int64
	}
	sites := map[string]*siteAgg{}
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
		s := memtimeline.SiteOf(attr, int(lt.Alloc), memtimeline.SiteOptions{Device: opts.Device, Depth: opts.Depth})
		key := strings.Join(s.Frames, "\x00") + "\x01" + s.Operator
		agg := sites[key]
		if agg == nil {
			agg = &siteAgg{site: s, perStep: map[int]int64{}}
			sites[key] = agg
		}
		agg.perStep[k] += lt.Bytes
		agg.blocks++
		agg.bytes += lt.Bytes
	}

	if rep.WholeWindow {
		rep.Verdict = VerdictUnknown
		rep.Reason = fmt.Sprintf("no ProfilerStep annotations (profile with a schedule and call prof.step()): the whole window was treated as one step; %s allocated in it is still alive at the end", memtimeline.FormatBytes(rep.UnreleasedBytes))
		for _, a := range sites {
			rep.Suspects = append(rep.Suspects, LeakSuspect{Bytes: a.bytes, Blocks: a.blocks, Operator: a.site.Operator, ForwardOp: a.site.ForwardOp, Stack: nonNil(a.site.Frames), FirstStep: -1, LastStep: -1, StepsWithSurvivors: 1})
		}
		sortSuspects(rep.Suspects)
		return rep
	}
	early := len(steps) - opts.SteadySteps
	if len(steps) < 3 || early < 1 {
		rep.Verdict = VerdictUnknown
		rep.Reason = fmt.Sprintf("only %d profiled steps: at least 3 are needed to tell growth from the last steps' steady state (raise active= in the profiler schedule)", len(steps))
		return rep
	}
	// A suspect keeps blocks from most early steps: one-off caches (a
	// lazily built buffer) survive from a single step and are not growth.
	need := max(2, (3*early+3)/4)
	if early < 2 {
		need = 1
	}
	for _, a := range sites {
		var earlyBytes int64
		stepsWith := 0
		first, last := -1, -1
		for k, b := range a.perStep {
			if first < 0 || k < first {
				first = k
			}
			last = max(last, k)
			if k < early {
				earlyBytes += b
				stepsWith++
			}
		}
		if stepsWith < need {
			continue
		}
		rep.Suspects = append(rep.Suspects, LeakSuspect{
			BytesPerStep: earlyBytes / int64(early), Blocks: a.blocks, Bytes: a.bytes,
			Operator: a.site.Operator, ForwardOp: a.site.ForwardOp, Stack: nonNil(a.site.Frames),
			FirstStep: steps[first].Number, LastStep: steps[last].Number, StepsWithSurvivors: len(a.perStep),
		})
	}
	sortSuspects(rep.Suspects)
	for _, s := range rep.Suspects {
		rep.GrowthBytesPerStep += s.BytesPerStep
	}
	steady := rep.Steps[early].Name
	if opts.SteadySteps > 1 {
		steady += ".." + rep.Steps[len(rep.Steps)-1].Name
	}
	switch {
	case rep.GrowthBytesPerStep >= opts.MinBytesPerStep:
		rep.Verdict = VerdictLeak
		top := rep.Suspects[0]
		rep.Reason = fmt.Sprintf("%s per step stays allocated: blocks from %d of %d steps are still alive at the same site(s); top suspect %s via %s",
			memtimeline.FormatBytes(rep.GrowthBytesPerStep), top.StepsWithSurvivors, len(steps), lastFrame(top.Stack), firstOp(top.Operator))
	default:
		rep.Verdict = VerdictClean
		var steadyBytes int64
		for _, s := range rep.Steps[early:] {
			steadyBytes += s.SurvivorBytes
		}
		rep.Reason = fmt.Sprintf("no growth: blocks alive at the end come from %s (%s, steady state: gradients, outputs, rolling buffers)", steady, memtimeline.FormatBytes(steadyBytes))
		if rep.GrowthBytesPerStep > 0 {
			rep.Reason += fmt.Sprintf("; %s per step of repeated survivors is under the %s threshold", memtimeline.FormatBytes(rep.GrowthBytesPerStep), memtimeline.FormatBytes(opts.MinBytesPerStep))
		}
	}
	return rep
}

func sortSuspects(s []LeakSuspect) {
	slices.SortFunc(s, func(a, b LeakSuspect) int {
		return cmp.Or(cmp.Compare(b.BytesPerStep, a.BytesPerStep), cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Operator, b.Operator), slices.Compare(a.Stack, b.Stack))
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func lastFrame(stack []string) string {
	if len(stack) == 0 {
		return "(no Python stack)"
	}
	return stack[len(stack)-1]
}

func firstOp(chain string) string {
	if i := strings.Index(chain, " > "); i >= 0 {
		return chain[:i]
	}
	if chain == "" {
		return "(no operator)"
	}
	return chain
}
