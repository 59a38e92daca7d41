package leak

import (
	"maps"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
)

// growingFrame is a Python function called more often every step.
type growingFrame struct {
	counts      []int
	first, last int64
	// modules are the nn.Module frames it ran under when torch.nn's hook
	// dispatch (torch/nn/modules/module.py) called it: the modules it is
	// registered on as a hook.
	modules map[string]bool
	// For registeredKey: the registration method called every step
	// (register_forward_hook...) and the user's frame that called it.
	register, caller string
}

// registeredKey is where growingFrames files a module hook registered in
// each profiled step (a key no frame name can be).
const registeredKey = "\x00hook registered every step"

// keeperKey is where growingFrames files the hooks that run on a module
// (a key no frame name can be).
func keeperKey(module string) string { return "\x00hooks on " + module }

// moduleHooks names the user hooks that run on the innermost module of a
// site's frames (torch's hook dispatch calls them with its output), "" when
// none does.
func moduleHooks(frames []string, hooks map[string]growingFrame) string {
	for i := len(frames) - 1; i >= 0; i-- {
		if !strings.HasPrefix(frames[i], "nn.Module:") {
			continue
		}
		names := slices.Sorted(maps.Keys(hooks[keeperKey(frames[i])].modules))
		return strings.Join(names, ", ")
	}
	return ""
}

// hookOnModule returns the growing hook registered on the innermost module
// of a site's frames, "" when none is.
func hookOnModule(frames []string, hooks map[string]growingFrame) string {
	for i := len(frames) - 1; i >= 0; i-- {
		if !strings.HasPrefix(frames[i], "nn.Module:") {
			continue
		}
		names := make([]string, 0, len(hooks))
		for name := range hooks {
			names = append(names, name)
		}
		slices.Sort(names) // deterministic
		for _, name := range names {
			if !strings.HasPrefix(name, "\x00") && hooks[name].modules[frames[i]] {
				return name
			}
		}
		return ""
	}
	return ""
}

// growingFrames finds Python functions whose calls per step increase in
// at least 3 consecutive steps by one or more each step: a hook registered
// again every step.
func growingFrames(t *chrometrace.Trace, steps []chrometrace.Step, stepOf func(int64) int) map[string]growingFrame {
	// Per name (by string id: a million frames share a few thousand
	// names), calls per step.
	counts := make([][]int, len(t.Strings))
	for i := range t.PyFrames {
		f := &t.PyFrames[i]
		k := stepOf(f.Start)
		if k < 0 || f.Start > steps[k].End() {
			continue
		}
		c := counts[f.Name]
		if c == nil {
			c = make([]int, len(steps))
			counts[f.Name] = c
		}
		c[k]++
	}
	// The modules each function ran under as a hook: its caller is torch's
	// module dispatch, and the nearest nn.Module frame above is the module.
	byID := newFrameIDs(t.PyFrames)
	hookOf := map[chrometrace.StrID]map[string]bool{}
	dispatch := make([]bool, len(t.Strings)) // names of torch's module dispatch
	for i, n := range t.Strings {
		dispatch[i] = strings.Contains(n, "torch/nn/modules/module.py")
	}
	for i := range t.PyFrames {
		f := &t.PyFrames[i]
		p, ok := byID.get(f.Thread, f.ParentID)
		if !ok || !dispatch[t.PyFrames[p].Name] {
			continue
		}
		// torch's dispatch calls the module's forward too: not a hook.
		if pf, ok := chrometrace.ParseFrame(t.Str(f.Name)); !ok || pf.Name == "forward" || pf.Name == "_forward_unimplemented" {
			continue
		}
		for q, ok := p, true; ok; q, ok = byID.get(f.Thread, t.PyFrames[q].ParentID) {
			if n := t.Str(t.PyFrames[q].Name); strings.HasPrefix(n, "nn.Module:") {
				if hookOf[f.Name] == nil {
					hookOf[f.Name] = map[string]bool{}
				}
				hookOf[f.Name][n] = true
				break
			}
		}
	}
	out := map[string]growingFrame{}
	// Hooks registered in every step: the registration is evidence of its
	// own, whether or not the hook shows up as a frame (a lambda does not).
	if g, ok := registeredEveryStep(t, steps, stepOf, byID); ok {
		out[registeredKey] = g
	}
	// Every user hook, growing or not, by the module it runs on: a hook
	// registered once that keeps the module's output is the keeper a
	// container leak names (keeperKey).
	for name, mods := range hookOf {
		n := t.Str(name)
		if chrometrace.IsLibraryFrame(n) {
			continue
		}
		for m := range mods {
			k := keeperKey(m)
			g := out[k]
			if g.modules == nil {
				g.modules = map[string]bool{}
			}
			g.modules[chrometrace.NormalizeFrame(n)] = true
			out[k] = g
		}
	}
	for name, c := range counts {
		if c == nil {
			continue
		}
		lo := 0
		for lo < len(c) && c[lo] == 0 {
			lo++
		}
		hi := len(c) - 1
		for hi > lo && c[hi] == 0 {
			hi--
		}
		if hi-lo+1 < 3 {
			continue
		}
		ok := true
		for i := lo + 1; i <= hi; i++ {
			ok = ok && c[i] > c[i-1]
		}
		n := t.Str(chrometrace.StrID(name))
		if ok && !chrometrace.IsLibraryFrame(n) {
			out[chrometrace.NormalizeFrame(n)] = growingFrame{counts: slices.Clone(c[lo : hi+1]), first: steps[lo].Number, last: steps[hi].Number, modules: hookOf[chrometrace.StrID(name)]}
		}
	}
	return out
}

// registeredEveryStep finds a module hook registration
// (chrometrace.HookRegistration) called in each of 3 or more profiled
// steps, all of them: a hook registered again every step and never removed
// piles up, each copy running every call.
func registeredEveryStep(t *chrometrace.Trace, steps []chrometrace.Step, stepOf func(int64) int, byID *frameIDs) (growingFrame, bool) {
	if len(steps) < 3 {
		return growingFrame{}, false
	}
	reg := make([]string, len(t.Strings)) // by name id: the method, "" when not one
	seen := false
	for i, n := range t.Strings {
		if strings.Contains(n, "register_") {
			reg[i] = chrometrace.HookRegistration(n)
			seen = seen || reg[i] != ""
		}
	}
	if !seen {
		return growingFrame{}, false
	}
	counts := make([]int, len(steps))
	var g growingFrame
	for i := range t.PyFrames {
		f := &t.PyFrames[i]
		if reg[f.Name] == "" {
			continue
		}
		k := stepOf(f.Start)
		if k < 0 || f.Start > steps[k].End() {
			continue
		}
		counts[k]++
		if g.register == "" {
			g.register = reg[f.Name]
			// The user's code that called it: the nearest frame up that is
			// not a library's.
			for q, ok := byID.get(f.Thread, f.ParentID); ok; q, ok = byID.get(f.Thread, t.PyFrames[q].ParentID) {
				if n := t.Str(t.PyFrames[q].Name); !chrometrace.IsLibraryFrame(n) && !strings.HasPrefix(n, "nn.Module:") {
					g.caller = chrometrace.NormalizeFrame(n)
					break
				}
			}
		}
	}
	for _, c := range counts {
		if c == 0 {
			return growingFrame{}, false
		}
	}
	g.counts, g.first, g.last = counts, steps[0].Number, steps[len(steps)-1].Number
	return g, true
}

// underModule reports whether a site's frames run inside an nn.Module.
func underModule(frames []string) bool {
	for _, f := range frames {
		if strings.HasPrefix(f, "nn.Module:") {
			return true
		}
	}
	return false
}

// frameIDs finds a Python frame by its thread and "Python id" (the last
// such frame). Torch numbers a profile's frames 1, 2, 3...: a dense array
// indexed by id serves them in 4 bytes a frame, where a map took ten times
// that for the millions of frames of a large trace; ids reused across
// threads or far apart fall back to the map.
type frameIDs struct {
	frames []chrometrace.PyFrame
	dense  []int32 // id -> index+1, 0: none
	byID   map[[2]int64]int
}

func newFrameIDs(frames []chrometrace.PyFrame) *frameIDs {
	x := &frameIDs{frames: frames}
	maxID := int32(-1)
	for i := range frames {
		if id := frames[i].ID; id < 0 || int(id) > 2*len(frames)+1024 {
			maxID = -2
			break
		} else {
			maxID = max(maxID, id)
		}
	}
	if maxID >= -1 {
		x.dense = make([]int32, maxID+1)
		for i := range frames {
			f := &frames[i]
			if j := x.dense[f.ID]; j > 0 && frames[j-1].Thread != f.Thread {
				x.dense = nil // an id on two threads
				break
			}
			x.dense[f.ID] = int32(i + 1)
		}
	}
	if x.dense == nil {
		x.byID = map[[2]int64]int{}
		for i := range frames {
			f := &frames[i]
			x.byID[[2]int64{int64(f.Thread), int64(f.ID)}] = i
		}
	}
	return x
}

func (x *frameIDs) get(th chrometrace.ThreadID, id int32) (int, bool) {
	if x.dense == nil {
		i, ok := x.byID[[2]int64{int64(th), int64(id)}]
		return i, ok
	}
	if id < 0 || int(id) >= len(x.dense) || x.dense[id] == 0 {
		return 0, false
	}
	i := int(x.dense[id] - 1)
	if x.frames[i].Thread != th {
		return 0, false
	}
	return i, true
}
