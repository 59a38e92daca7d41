package chart

import (
	"slices"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The explorer of a real trace carries the n largest allocations in full,
// largest first, each with its operator and line, and counts every other
// one exactly once in the buckets of the rest.
func TestTraceExplorerBounded(t *testing.T) {
	tr := memtest.NamedTrace(t, "leak_module_cache")
	lts := memtimeline.Lifetimes(tr, -1)
	ex := memtimeline.TraceExplorer(tr, chrometrace.Attribute(tr), lts, 0, 25)
	if ex == nil || len(ex.Allocs) != 25 || ex.Total != len(lts) || len(ex.Rest) != len(lts)-25 {
		t.Fatalf("explorer of %d lifetimes: %d listed, total %d, rest %d", len(lts), len(ex.Allocs), ex.Total, len(ex.Rest))
	}
	if !slices.IsSortedFunc(ex.Allocs, func(a, b memtimeline.Allocation) int { return int(b.Bytes - a.Bytes) }) || ex.Allocs[24].Bytes < slices.MaxFunc(ex.Rest, func(a, b memtimeline.Lifetime) int { return int(a.Bytes - b.Bytes) }).Bytes {
		t.Error("not the largest, largest first")
	}
	lines := 0
	for _, a := range ex.Allocs {
		if a.Line != "" && len(a.Stack) > 0 && len(a.Operators) > 0 {
			lines++
		}
	}
	if lines == 0 {
		t.Error("no listed allocation has a line, a stack and an operator")
	}
	j := toJSON(ex, 0)
	var allocs, frees, ended int64
	for k := range j.Rest.Alloc {
		allocs += j.Rest.Alloc[k]
		frees += j.Rest.Free[k]
	}
	for _, lt := range ex.Rest {
		if lt.End >= 0 {
			ended++
		}
	}
	if allocs+j.Rest.Pre != int64(len(ex.Rest)) || frees != ended {
		t.Errorf("rest buckets count %d allocations + %d before, %d frees; the rest has %d, %d freed", allocs, j.Rest.Pre, frees, len(ex.Rest), ended)
	}
	if all := memtimeline.TraceExplorer(tr, chrometrace.Attribute(tr), lts, 0, 1<<20); len(all.Rest) != 0 || toJSON(all, 0).Rest != nil {
		t.Error("an explorer that lists everything still has a rest")
	}
}
