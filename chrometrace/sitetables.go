package chrometrace

import (
	"strings"
	"sync"
)

// siteTables name the site of every memory event once. A profiled step
// re-records the same Python stacks and operator chains, each occurrence
// its own PyFrames and HostOps entries; interning them as tries (a node per
// distinct chain, keyed by its parent node and its name) turns millions of
// per-allocation walks, frame parses and joins into one lookup each, and
// every analysis that names sites (sites, leaks, peak, fragmentation)
// shares the result.
type siteTables struct {
	once       sync.Once
	eventStack []int32    // per memory event: its node in stackUser, -1 none
	eventChain []int32    // per memory event: its node in chainText, -1 none
	stackUser  [][]string // per stack node: the user's chain (UserChain), read-only
	chainText  []string   // per chain node: "outer > ... > inner"
}

type trieEdge struct {
	parent int32
	name   StrID
}

// trie interns chains of names: a node per distinct chain.
type trie struct {
	parent []int32
	name   []StrID
	index  map[trieEdge]int32
}

func (tr *trie) node(parent int32, name StrID) int32 {
	e := trieEdge{parent, name}
	if n, ok := tr.index[e]; ok {
		return n
	}
	n := int32(len(tr.parent))
	tr.parent = append(tr.parent, parent)
	tr.name = append(tr.name, name)
	tr.index[e] = n
	return n
}

// names returns node n's chain, outermost first.
func (tr *trie) names(t *Trace, n int32) []string {
	var out []string
	for ; n >= 0; n = tr.parent[n] {
		out = append(out, t.Str(tr.name[n]))
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// resolveNodes gives item i (and every ancestor not yet seen) its trie
// node: the node of its nearest kept ancestor extended by its own name,
// or that ancestor's node when skip(i). memo holds each item's node plus
// 2, 0 for "not yet": a fresh (zeroed) list needs no filling.
func resolveNodes(i int32, parentOf []int32, memo []int32, tr *trie, nameOf func(int32) StrID, skip func(int32) bool, path []int32) ([]int32, int32) {
	path = path[:0]
	for g := i; g >= 0 && memo[g] == 0; g = parentOf[g] {
		path = append(path, g)
	}
	for k := len(path) - 1; k >= 0; k-- {
		g := path[k]
		base := int32(-1)
		if p := parentOf[g]; p >= 0 {
			base = memo[p] - 2
		}
		if skip != nil && skip(g) {
			memo[g] = base + 2
		} else {
			memo[g] = tr.node(base, nameOf(g)) + 2
		}
	}
	if i < 0 {
		return path, -1
	}
	return path, memo[i] - 2
}

func (a *Attribution) sites() *siteTables {
	a.siteTab.once.Do(a.buildSiteTables)
	return &a.siteTab
}

// PrepareSites builds the site tables now rather than at their first use
// (UserStack, OpChainText, SiteNodes), for a caller that knows they will
// be wanted and has an idle core meanwhile.
func (a *Attribution) PrepareSites() { a.sites() }

// buildSiteTables resolves every event's Python stack and operator chain
// to trie nodes and names the nodes events use. The two tries are
// independent: they build side by side, each memoized per frame or op in
// its own scratch list (see resolveNodes).
func (a *Attribution) buildSiteTables() {
	st := &a.siteTab
	st.eventStack = make([]int32, len(a.Events))
	st.eventChain = make([]int32, len(a.Events))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.buildStackTable()
	}()
	a.buildChainTable()
	wg.Wait()
}

// buildStackTable fills eventStack and stackUser: the user's frames of
// each stack events name (prefixes only events name are skipped).
func (a *Attribution) buildStackTable() {
	t, st := a.t, &a.siteTab
	var path []int32
	stacks := &trie{index: map[trieEdge]int32{}}
	frameNode := make([]int32, len(t.PyFrames))
	frameName := func(g int32) StrID { return t.PyFrames[g].Name }
	for i, ev := range a.Events {
		path, st.eventStack[i] = resolveNodes(ev.Frame, a.frameParent, frameNode, stacks, frameName, nil, path)
	}
	st.stackUser = make([][]string, len(stacks.parent))
	done := make([]bool, len(stacks.parent))
	for _, n := range st.eventStack {
		if n < 0 || done[n] {
			continue
		}
		done[n] = true
		frames := stacks.names(t, n)
		for k, f := range frames {
			frames[k] = NormalizeFrame(f)
		}
		user := UserChain(frames)
		st.stackUser[n] = user[:len(user):len(user)] // an append by a reader copies
	}
}

// buildChainTable fills eventChain and chainText: each chain events name,
// its ops joined with " > " (ProfilerStep ranges skipped).
func (a *Attribution) buildChainTable() {
	t, st := a.t, &a.siteTab
	var path []int32
	chains := &trie{index: map[trieEdge]int32{}}
	opNode := make([]int32, len(t.HostOps))
	stepName := make([]bool, len(t.Strings))
	for i, s := range t.Strings {
		stepName[i] = strings.HasPrefix(s, profilerStepPrefix)
	}
	opName := func(g int32) StrID { return t.HostOps[g].Name }
	isStep := func(g int32) bool { return stepName[t.HostOps[g].Name] }
	for i, ev := range a.Events {
		path, st.eventChain[i] = resolveNodes(ev.Op, a.opParent, opNode, chains, opName, isStep, path)
	}
	st.chainText = make([]string, len(chains.parent))
	done := make([]bool, len(chains.parent))
	for _, n := range st.eventChain {
		if n < 0 || done[n] {
			continue
		}
		done[n] = true
		st.chainText[n] = strings.Join(chains.names(t, n), " > ")
	}
}

// UserStack is the user's call chain around memory event i: its Python
// stack, outermost first, normalized and reduced by UserChain. Events with
// the same stack share one slice: read it, never modify it.
func (a *Attribution) UserStack(i int) []string {
	st := a.sites()
	if n := st.eventStack[i]; n >= 0 {
		return st.stackUser[n]
	}
	return []string{} // as UserChain of no frames: JSON writes [], not null
}

// OpChainText is OpChain(i) joined with " > ".
func (a *Attribution) OpChainText(i int) string {
	st := a.sites()
	if n := st.eventChain[i]; n >= 0 {
		return st.chainText[n]
	}
	return ""
}

// SiteNodes identifies memory event i's Python stack and operator chain
// without naming them: events with equal nodes have equal PyStack,
// UserStack, OpChain and OpChainText (-1: none). Analyses that sum per
// site key their maps by these and name each distinct site once.
func (a *Attribution) SiteNodes(i int) (stack, chain int32) {
	st := a.sites()
	return st.eventStack[i], st.eventChain[i]
}

// ForwardName is ForwardOp(i)'s string id (NoStr for none).
func (a *Attribution) ForwardName(i int) StrID {
	if f := a.Events[i].Forward; f >= 0 {
		return a.t.HostOps[f].Name
	}
	return NoStr
}
