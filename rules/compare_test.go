package rules

import (
	"fmt"
	"testing"
)

// diff pairs thousands of ranks by kind and rank (it was a cubic scan);
// one trace per side pairs whatever the ranks; unmatched groups warn.
func TestDiffPairsManyRanks(t *testing.T) {
	group := func(kind SourceKind, rank int64) *diffGroup {
		return &diffGroup{kind: kind, rank: rank, inputs: []*Input{{Source: fmt.Sprintf("%s-%d", kind, rank)}}}
	}
	const n = 5000
	var base, head []*diffGroup
	for r := range int64(n) {
		base = append(base, group(SourceTrace, r))
		head = append(head, group(SourceTrace, n-1-r))
	}
	base = append(base, group(SourceSnapshot, 7))
	head = append(head, group(SourceSnapshot, 9), group(SourceTrace, n+1))
	pairs, unpaired := pairSides(base, head, "base", "head")
	if len(pairs) != n+1 || len(unpaired) != 1 {
		t.Fatalf("%d pairs, %d unpaired; want %d and 1", len(pairs), len(unpaired), n+1)
	}
	for _, p := range pairs {
		if p[0].kind != p[1].kind || (p[0].kind == SourceTrace && p[0].rank != p[1].rank) {
			t.Errorf("paired %s rank %d with %s rank %d", p[0].kind, p[0].rank, p[1].kind, p[1].rank)
		}
	}
}
