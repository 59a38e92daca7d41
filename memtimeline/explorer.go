package memtimeline

import (
	"cmp"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
)

// What the explorer under a memory chart lists (the report draws it):
// the largest allocations in full, with their size, operator chain,
// Python line and stack, allocation and free times, and the rest only as
// lifetimes, for their counts over time. It is computed here, once per
// input by rules, so that the page only lays it out.

// DefaultExplorerAllocs is how many allocations (the largest) an explorer
// carries in full.
const DefaultExplorerAllocs = 2000

// Allocation is one allocator block as the explorer lists it.
type Allocation struct {
	Bytes int64
	// StartNs is -1 for a block allocated before the window, EndNs -1 for
	// one alive at its end.
	StartNs, EndNs int64
	// Operators is the operator chain, outermost first; Line the user's
	// innermost line; Stack the Python stack, outermost first.
	Operators []string
	Line      string
	Stack     []string
}

// Explorer is what a chart's explorer lists: Allocs, the largest of Total
// allocations, and Rest, the others as counts over time.
type Explorer struct {
	Total  int
	Allocs []Allocation
	// Rest are the lifetimes left out, for their counts only.
	Rest []Lifetime
}

// TraceExplorer builds the explorer of one GPU of a trace from its
// lifetimes: the n largest allocations in full (n <= 0: the default).
func TraceExplorer(t *chrometrace.Trace, attr *chrometrace.Attribution, lts []Lifetime, device, n int) *Explorer {
	if n <= 0 {
		n = DefaultExplorerAllocs
	}
	var mine []Lifetime
	for _, lt := range lts {
		if int(lt.Device) == device {
			mine = append(mine, lt)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	// Largest first; ties by time so the page is the same run to run.
	slices.SortStableFunc(mine, func(a, b Lifetime) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End))
	})
	ex := &Explorer{Total: len(mine)}
	keep := min(n, len(mine))
	for _, lt := range mine[:keep] {
		a := Allocation{Bytes: lt.Bytes, StartNs: lt.Start, EndNs: lt.End}
		if lt.Alloc >= 0 && attr != nil {
			i := int(lt.Alloc)
			a.Operators = attr.OpChain(i)
			if us := attr.UserStack(i); len(us) > 0 {
				a.Line = us[len(us)-1]
			}
			a.Stack = attr.PyStack(i)
			for k, f := range a.Stack {
				a.Stack[k] = chrometrace.NormalizeFrame(f)
			}
		}
		ex.Allocs = append(ex.Allocs, a)
	}
	ex.Rest = mine[keep:]
	return ex
}
