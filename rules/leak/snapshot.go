package leak

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

// AnalyzeSnapshot answers the leak question from an allocator
// snapshot's recorded history: allocations never freed, grouped by the
// user's innermost frame (the line that holds them), judged like a
// trace's: a group that keeps memory from each of at least 3 consecutive
// ProfilerSteps, steadily or more each step, is a leak at any size; one
// made in a single step (parameters, optimizer state) or the last step or
// two is not.
func AnalyzeSnapshot(rep *snapshot.Report, opts Options) Report {
	out := Report{Steps: []StepSurvivors{}, Suspects: []Suspect{}, Leaks: []Leak{}}
	minSteps := max(3, opts.MinSteps)
	if len(rep.TraceEntries) == 0 {
		out.Verdict = VerdictUnknown
		out.Reason = "the snapshot has no recorded history: call torch.cuda.memory._record_memory_history() before the steps you want to see"
		return out
	}
	for _, c := range rep.Leaks {
		out.UnreleasedBytes += c.Bytes
		out.UnreleasedBlocks += int64(c.Count)
	}
	stepIdx := map[int]int{}
	for i, st := range rep.Steps {
		stepIdx[st] = i
		out.Steps = append(out.Steps, StepSurvivors{Name: fmt.Sprintf("ProfilerStep#%d", st), Number: int64(st), Steady: i >= len(rep.Steps)-opts.SteadySteps})
	}
	if len(rep.Steps) == 0 {
		if recurring(rep, &out, minSteps) {
			return out
		}
		out.Verdict = VerdictUnknown
		out.WholeWindow = true
		out.Reason = fmt.Sprintf("the recorded history has no ProfilerStep annotations, so growth per step cannot be told; %s was never freed", memtimeline.FormatBytes(out.UnreleasedBytes))
		for _, c := range rep.Leaks {
			stack := snapshotChain(c)
			out.Suspects = append(out.Suspects, Suspect{Bytes: c.Bytes, Blocks: int64(c.Count), Stack: stack, Site: site.Label(stack, ""),
				FirstStep: -1, LastStep: -1, Kind: KindUnknown, StackNote: snapshotStackNote})
		}
		sortSuspects(out.Suspects)
		return out
	}
	if len(rep.Steps) < minSteps {
		out.Verdict = VerdictUnknown
		out.Reason = fmt.Sprintf("the recorded history annotates only %d ProfilerSteps: at least %d are needed to tell a leak from the last steps' outputs", len(rep.Steps), minSteps)
		return out
	}
	hooks := map[string]growingFrame{}
	for _, c := range rep.Leaks {
		bytes, blocks := make([]int64, len(rep.Steps)), make([]int64, len(rep.Steps))
		lines, bwdAfter := make([]int, len(rep.Steps)), make([]bool, len(rep.Steps))
		for _, sb := range c.StepBytes {
			if i, ok := stepIdx[sb.Step]; ok {
				out.Steps[i].SurvivorBytes += sb.Bytes
				out.Steps[i].SurvivorBlocks += int64(sb.Count)
				bytes[i] += sb.Bytes
				blocks[i] += int64(sb.Count)
				lines[i], bwdAfter[i] = sb.Lines, sb.BackwardAfter
			}
		}
		r, ok := regularRun(bytes, blocks, minSteps)
		if !ok || r.hi-r.lo+1 <= c.MaxRetentionSteps {
			continue
		}
		stack := snapshotChain(c)
		s := Suspect{
			BytesPerStep: r.bytesPerStep, Stack: stack, Site: site.Label(stack, ""),
			FirstStep: int64(rep.Steps[r.lo]), LastStep: int64(rep.Steps[r.hi]), StepsWithSurvivors: r.hi - r.lo + 1,
			BytesByStep: slices.Clone(bytes[r.lo : r.hi+1]), Accelerating: r.accelerating, StackNote: snapshotStackNote,
			Period: int64(r.period), RiseBytes: r.rise,
			copy: 2*c.CopyAllocs > c.Count,
		}
		if c.Site.IsPython() {
			s.location = &site.Location{File: c.Site.Filename, Line: c.Site.Line, Function: c.Site.Name}
		}
		for k := r.lo; k <= r.hi; k++ {
			s.Blocks += blocks[k]
			s.Bytes += bytes[k]
		}
		// Evidence over the run: how many code lines made what each step
		// kept, and whether backward ran after it in the same step.
		backwardSteps := 0
		runLines := make([]int, 0, r.hi-r.lo+1)
		for k := r.lo; k <= r.hi; k++ {
			if bwdAfter[k] {
				backwardSteps++
			}
			runLines = append(runLines, lines[k])
		}
		slices.Sort(runLines)
		s.allocPoints = runLines[len(runLines)/2]
		switch {
		case c.HookFrame != nil:
			s.Kind = KindHook
			hooks[snapshot.FrameName(*c.HookFrame, c.Stack)] = growingFrame{first: s.FirstStep, last: s.LastStep}
		case s.allocPoints >= 2 && !s.copy:
			// Several tensors from a model's internals each step: outputs
			// kept in a list (a KV cache) or the activations a kept graph
			// saved. An allocator snapshot records no autograd graph, so
			// it cannot tell which: the kind stays unknown, said so.
			s.Kind = KindUnknown
			s.keptLines = true
			_ = backwardSteps
		default:
			s.Kind = KindContainer
		}
		out.Suspects = append(out.Suspects, s)
	}
	if out.group(hooks, "never freed") {
		return out
	}
	out.Verdict = VerdictClean
	out.Reason = fmt.Sprintf("no site keeps memory from %d consecutive steps; %s never freed comes from one-off allocations (parameters, optimizer state, the last steps' outputs)", minSteps, memtimeline.FormatBytes(out.UnreleasedBytes))
	return out
}

// recurring answers from a history without ProfilerStep annotations (the
// profiler was off: TORCHMEM_TRACE=0) and without a step log to cut it
// with: a site whose never-freed blocks, minSteps or more, were made at
// regular intervals (the longest at most twice the shortest; the first
// one may be a one-time buffer) keeps memory once per iteration of some
// loop: a leak, its figure per recurrence. It reports false when no site
// recurs.
func recurring(rep *snapshot.Report, out *Report, minSteps int) bool {
	for _, c := range rep.Leaks {
		t := c.TimesUS
		if len(t) < minSteps {
			continue
		}
		regular := func(t []int64) bool {
			if len(t) < minSteps {
				return false
			}
			lo, hi := int64(math.MaxInt64), int64(0)
			for i := 1; i < len(t); i++ {
				d := t[i] - t[i-1]
				lo, hi = min(lo, d), max(hi, d)
			}
			return lo > 0 && hi <= 2*lo
		}
		n := len(t)
		if !regular(t) {
			if !regular(t[1:]) {
				continue
			}
			n--
		}
		stack := snapshotChain(c)
		var kept int64
		for _, b := range c.Sizes[len(t)-n:] {
			kept += b
		}
		per := kept / int64(n)
		s := Suspect{BytesPerStep: per, Bytes: c.Bytes, Blocks: int64(c.Count), Stack: stack, Site: site.Label(stack, ""),
			FirstStep: -1, LastStep: -1, StepsWithSurvivors: n, Kind: KindContainer, StackNote: snapshotStackNote, copy: 2*c.CopyAllocs > c.Count}
		if c.HookFrame != nil {
			s.Kind = KindHook
		}
		if c.Site.IsPython() {
			s.location = &site.Location{File: c.Site.Filename, Line: c.Site.Line, Function: c.Site.Name}
		}
		out.Suspects = append(out.Suspects, s)
	}
	if len(out.Suspects) == 0 {
		return false
	}
	out.group(map[string]growingFrame{}, "never freed")
	out.WholeWindow = true
	period := (rep.TraceEndUS - rep.TraceStartUS) / int64(max(out.Suspects[0].StepsWithSurvivors, 1))
	out.Reason = fmt.Sprintf("%s never freed per recurrence: %s kept a block %d times at regular intervals (about every %s), though the history has no step annotations (profiler off) to count steps by; a step log beside it (the snippet's steps.jsonl) cuts it into steps; %s",
		memtimeline.FormatBytes(out.GrowthBytesPerStep), out.Suspects[0].Site, out.Suspects[0].StepsWithSurvivors, time.Duration(period)*time.Microsecond, out.Reason)
	return true
}

const snapshotStackNote = "from the allocator snapshot: each frame's line is the line that was running (the call), down to the allocating line"

// snapshotChain is a leak candidate's user call chain, outermost first,
// C++ frames dropped and library paths shortened.
func snapshotChain(c snapshot.LeakCandidate) []string {
	names := make([]string, 0, len(c.Stack)+1)
	for i := len(c.Stack) - 1; i >= 0; i-- {
		if f := c.Stack[i]; f.IsPython() {
			names = append(names, snapshot.FrameName(f, c.Stack))
		}
	}
	if len(names) == 0 && c.Site.Name != "" {
		names = append(names, snapshot.FrameName(c.Site, c.Stack))
	}
	return fmtutil.NonNil(chrometrace.UserChain(names))
}

// SnapshotChain is the user call chain of a snapshot stack (innermost
// first) whose user frame is site, outermost first, as leak findings name
// it.
func SnapshotChain(site snapshot.Frame, stack []snapshot.Frame) []string {
	return snapshotChain(snapshot.LeakCandidate{Site: site, Stack: stack})
}
