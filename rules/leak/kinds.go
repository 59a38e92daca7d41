package leak

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

// group makes the report's leaks out of its suspects, one per cause
// (groupLeaks), and lists the sites again flat, each carrying its leak's
// kind, evidence and fix; the growth is the leaks' bytes per step summed.
// With a leak it sets the verdict and its reason (what per step is kept:
// "stays allocated", "never freed") and reports true.
func (rep *Report) group(hooks map[string]growingFrame, kept string) bool {
	sortSuspects(rep.Suspects)
	rep.Leaks = groupLeaks(rep.Suspects, hooks)
	rep.Suspects = rep.Suspects[:0]
	for i, l := range rep.Leaks {
		for j := range l.Sites {
			rep.Leaks[i].Sites[j].Evidence, rep.Leaks[i].Sites[j].Fix = l.Evidence, l.Fix
		}
		rep.Suspects = append(rep.Suspects, rep.Leaks[i].Sites...)
		rep.GrowthBytesPerStep += l.BytesPerStep
	}
	sortSuspects(rep.Suspects)
	if len(rep.Leaks) == 0 {
		return false
	}
	rep.Verdict = VerdictLeak
	l := rep.Leaks[0]
	rep.Reason = fmt.Sprintf("%s per step %s: %s keeps memory from each of %s",
		memtimeline.FormatBytes(rep.GrowthBytesPerStep), kept, l.Sites[0].Site, l.stepsPhrase())
	if l.Period > 1 {
		rep.Reason = fmt.Sprintf("%s every %d steps (%s per step) %s: %s keeps memory from each of %s",
			memtimeline.FormatBytes(l.Sites[0].RiseBytes), l.Period, memtimeline.FormatBytes(rep.GrowthBytesPerStep), kept, l.Sites[0].Site, l.stepsPhrase())
	}
	if l.Accelerating {
		rep.Reason += fmt.Sprintf(", more every step (accelerating, +%s per step each step)", memtimeline.FormatBytes(l.AccelerationBytes))
	}
	rep.Reason += fmt.Sprintf("; kind %s: %s", l.Kind, l.Evidence)
	if len(rep.Leaks) > 1 {
		rep.Reason += fmt.Sprintf(" (and %d more leak(s))", len(rep.Leaks)-1)
	}
	return true
}

// siteKind tells from a site's own evidence why it keeps memory.
func siteKind(a *siteSeries, hooks map[string]growingFrame, known bool) string {
	for _, f := range a.site.Frames {
		if _, ok := hooks[f]; ok {
			return KindHook
		}
	}
	// The memory is made by a module (its output) on which a hook piles
	// up: the hook, called one more time each step, is what keeps it.
	if hookOnModule(a.site.Frames, hooks) != "" {
		return KindHook
	}
	// A module hook registered in every step, the memory made inside a
	// module, and no hook of the user's seen running on that module (a
	// hook that shows up is judged by its own calls, above): the hook
	// runs without a frame (a lambda), and its copies keep the memory.
	if _, ok := hooks[registeredKey]; ok && underModule(a.site.Frames) && moduleHooks(a.site.Frames, hooks) == "" {
		return KindHook
	}
	if !known {
		return KindUnknown
	}
	total := a.graphBlocks + a.backwardMadeBlocks + a.noGraphBlocks
	switch {
	case total == 0:
		return KindUnknown
	case 2*a.graphBlocks > total:
		if 2*a.backwardRanBlocks > a.graphBlocks {
			return KindRetainGraph
		}
		return KindAutogradGraph
	}
	return KindContainer
}

// copyOps make a new tensor out of an existing one: what a container
// keeps when the user stores a copy.
var copyOps = []string{"aten::clone", "aten::copy_", "aten::_to_copy", "aten::to", "aten::contiguous", "aten::detach", "aten::cat", "aten::stack", "aten::index_select", "aten::cpu"}

func isCopySite(op string) bool {
	for _, c := range copyOps {
		if strings.HasPrefix(op, c+" ") || op == c {
			return true
		}
	}
	return false
}

// groupLeaks makes one leak per cause. A graph kept alive holds many
// tensors (each layer's output and what it saved); tensors it saved that
// no op of the graph made (inputs, targets) are part of the same leak.
// A single graph site on its own is a tensor kept in a container that
// happens to carry its graph.
func groupLeaks(suspects []Suspect, hooks map[string]growingFrame) []Leak {
	graphSites := map[string]int{}
	for _, s := range suspects {
		if s.Kind == KindAutogradGraph || s.Kind == KindRetainGraph {
			graphSites[s.Kind] += max(1, s.allocPoints)
		}
	}
	graphKind := ""
	for _, k := range []string{KindRetainGraph, KindAutogradGraph} {
		if graphSites[k] >= 2 && (graphKind == "" || graphSites[k] > graphSites[graphKind]) {
			graphKind = k
		}
	}
	// A snapshot site keeping several lines' tensors (a container or a
	// graph: unknown) takes in the single tensors kept beside it, as a
	// graph would (the inputs it saved); it claims no more than that.
	keptGroup := false
	for _, s := range suspects {
		keptGroup = keptGroup || s.keptLines
	}
	byKind := map[string]*Leak{}
	var out []*Leak
	for _, s := range suspects {
		k := s.Kind
		switch {
		case k == KindContainer && graphKind == "" && keptGroup && !isCopySite(s.Operator) && !s.copy:
			k = KindUnknown
		case (k == KindAutogradGraph || k == KindRetainGraph) && graphSites[k] < 2:
			// A graph kept alive keeps what its ops saved, made elsewhere;
			// one tensor kept on its own (detached or not) is a container.
			k = KindContainer
		case k == KindContainer && graphKind != "" && !isCopySite(s.Operator) && !s.copy:
			k = graphKind
		}
		s.Kind = k
		s.HoldingLine = holdingLine(s.Stack, k)
		if i := userFrameIndex(s.Stack, s.HoldingLine); i >= 0 && i < s.preProfiled {
			s.LineNotRecorded = true
		}
		l := byKind[k]
		if l == nil {
			l = &Leak{Kind: k, FirstStep: s.FirstStep, LastStep: s.LastStep}
			byKind[k] = l
			out = append(out, l)
		}
		l.Sites = append(l.Sites, s)
		l.BytesPerStep += s.BytesPerStep
		l.FirstStep, l.LastStep = min(l.FirstStep, s.FirstStep), max(l.LastStep, s.LastStep)
		l.Period = max(l.Period, s.Period)
		if s.Accelerating {
			l.Accelerating = true
			n := len(s.BytesByStep)
			if n > 1 {
				l.AccelerationBytes += (s.BytesByStep[n-1] - s.BytesByStep[0]) / int64(n-1)
			}
		}
	}
	res := make([]Leak, 0, len(out))
	for _, l := range out {
		l.Evidence, l.Fix = explainLeak(l, hooks)
		res = append(res, *l)
	}
	slices.SortStableFunc(res, func(a, b Leak) int { return cmp.Compare(b.BytesPerStep, a.BytesPerStep) })
	return res
}

// explainLeak gives the one-line evidence and the specific fix.
func explainLeak(l *Leak, hooks map[string]growingFrame) (evidence, fix string) {
	top := l.Sites[0]
	steps := l.stepsPhrase()
	where := top.Site
	switch l.Kind {
	case KindContainer:
		by := "by " + site.FirstOp(top.Operator)
		if top.Operator == "" {
			by = "at " + where
		}
		kept := top.BytesPerStep
		if top.Period > 1 {
			kept = top.RiseBytes
		}
		if h := moduleHooks(top.Stack, hooks); h != "" {
			// The module's output goes to its hooks: one registered once
			// (its calls do not grow) is where a list keeps it.
			return fmt.Sprintf("%s made %s in each of %s is never freed, and nothing of an autograd graph survives with it; the module that makes it has a hook, %s, called with it every step (registered once: its calls do not grow): the hook keeping its output in a list or dict is the likely keeper",
					memtimeline.FormatBytes(kept), by, steps, h),
				fmt.Sprintf("In the hook (%s), keep .detach().cpu() copies or a bounded deque, or clear what it collects each step", h)
		}
		return fmt.Sprintf("%s made %s in each of %s is never freed, and nothing of an autograd graph survives with it: a list, dict or cache keeps it",
				memtimeline.FormatBytes(kept), by, steps),
			"Stop keeping a tensor per step: store .item() or .cpu() values, bound it (collections.deque(maxlen=N)), or clear it each step"
	case KindAutogradGraph:
		return fmt.Sprintf("tensors made in the forward pass that recorded an autograd graph (%d %s) survive %s and no backward ran over them: outputs that require grad are kept, and the activations their graph saved stay with them", len(l.Sites), fmtutil.Plural(float64(len(l.Sites)), "site", "sites"), steps),
			"Run evaluation under torch.no_grad() (or torch.inference_mode()); keep out.detach() or out.cpu() if the outputs are needed"
	case KindRetainGraph:
		return fmt.Sprintf("backward ran over these operators in each of %s, yet the %d tensor %s it saved survive: the graph is kept alive after backward (retain_graph=True with the loss or outputs kept)", steps, len(l.Sites), fmtutil.Plural(float64(len(l.Sites)), "site", "sites")),
			"Drop retain_graph=True unless the same graph is backwarded twice, and keep loss.item() or loss.detach() rather than the loss"
	case KindHook:
		for _, f := range top.Stack {
			h, ok := hooks[f]
			if ok && len(h.counts) == 0 {
				return fmt.Sprintf("%s runs as a hook (called by torch.nn's hook dispatch, not as forward) and keeps memory from each of %s: a hook registered every step and never removed piles up", f, steps),
					fmt.Sprintf("Register the hook (%s) once, outside the loop, or keep its handle and call handle.remove()", f)
			}
			if ok {
				return fmt.Sprintf("%s ran %s times in steps #%d..#%d, one more call each step: a hook registered every step and never removed keeps what it saves",
						f, joinCounts(h.counts), h.first, h.last),
					fmt.Sprintf("Register the hook (%s) once, outside the loop, or keep its handle and call handle.remove()", f)
			}
		}
		if h := hookOnModule(top.Stack, hooks); h != "" {
			g := hooks[h]
			return fmt.Sprintf("%s, a hook on the module that makes this memory, ran %s times in steps #%d..#%d, one more call each step: a hook registered every step and never removed keeps the module's output",
					h, joinCounts(g.counts), g.first, g.last),
				fmt.Sprintf("Register the hook (%s) once, outside the loop, or keep its handle and call handle.remove()", h)
		}
		if g, ok := hooks[registeredKey]; ok {
			from, in := "", ""
			if g.caller != "" {
				from, in = " from "+g.caller, " (in "+g.caller+")"
			}
			return fmt.Sprintf("%s was called%s in each of steps #%d..#%d (%s times), and memory made inside the module is kept from each of %s: a hook registered every step and never removed keeps it (the hook itself runs without a Python frame in the trace, as a lambda does)",
					g.register, from, g.first, g.last, joinCounts(g.counts), steps),
				fmt.Sprintf("Register the hook once, outside the loop%s, or keep the handle %s returns and call handle.remove()", in, g.register)
		}
	}
	if top.keptLines {
		return fmt.Sprintf("%s keeps tensors made by %d or more lines from each of %s: a container (a list, a KV cache) or an autograd graph kept with its outputs; an allocator snapshot records no autograd graph, so it cannot tell which (a trace with profile_memory and with_stack can)", where, max(top.allocPoints, 2), steps),
			"Find what keeps these tensors from one step to the next: a list or cache that grows (store .cpu() copies or bound it), or outputs kept with their graph (evaluate under torch.no_grad(), keep out.detach())"
	}
	return fmt.Sprintf("%s keeps memory from each of %s; the trace does not say what holds it", where, steps),
		"Find what keeps a reference to these tensors at that line (a list or cache that grows, outputs kept with their graph)"
}

// stepsPhrase names the steps a leak kept memory in: "steps #2..#7", or
// for a periodic one "steps #4, #9 (every 5th step; nothing kept between)".
func (l *Leak) stepsPhrase() string {
	if l.Period <= 1 {
		return fmt.Sprintf("steps #%d..#%d", l.FirstStep, l.LastStep)
	}
	var at []string
	for st := l.FirstStep; st <= l.LastStep; st += l.Period {
		at = append(at, fmt.Sprintf("#%d", st))
	}
	return fmt.Sprintf("steps %s (every %d steps; nothing kept between)", strings.Join(at, ", "), l.Period)
}

func joinCounts(c []int) string {
	s := make([]string, len(c))
	for i, n := range c {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

func sortSuspects(s []Suspect) {
	slices.SortFunc(s, func(a, b Suspect) int {
		return cmp.Or(cmp.Compare(b.BytesPerStep, a.BytesPerStep), cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Operator, b.Operator), slices.Compare(a.Stack, b.Stack))
	})
}

// userFrameIndex is the position of frame among the chain's user frames
// (library and module frames skipped), -1 when it is not one.
func userFrameIndex(stack []string, frame string) int {
	n := 0
	for _, f := range stack {
		if _, ok := chrometrace.ParseFrame(f); !ok || chrometrace.IsLibraryFrame(f) {
			continue
		}
		if f == frame {
			return n
		}
		n++
	}
	return -1
}

// holdingLine picks the frame of a chain (outermost first) that holds the
// memory. For a graph kept alive it is the user's line that called into
// the model: the frame before the outermost module frame ("nn.Module:
// ...", a forward) or library frame. Otherwise it is the innermost user
// frame with a file and line: where the kept tensor was made.
func holdingLine(stack []string, kind string) string {
	if kind == KindAutogradGraph || kind == KindRetainGraph {
		for i, f := range stack {
			pf, ok := chrometrace.ParseFrame(f)
			if strings.HasPrefix(f, "nn.Module:") || chrometrace.IsLibraryFrame(f) || (ok && pf.Name == "forward") {
				if i > 0 {
					if _, ok := chrometrace.ParseFrame(stack[i-1]); ok && !chrometrace.IsLibraryFrame(stack[i-1]) {
						return stack[i-1]
					}
				}
				break
			}
		}
	}
	for i := len(stack) - 1; i >= 0; i-- {
		if _, ok := chrometrace.ParseFrame(stack[i]); ok && !chrometrace.IsLibraryFrame(stack[i]) {
			return stack[i]
		}
	}
	return ""
}
