package rules

import (
	"fmt"
	"testing"
)

// Thousands of ranks group one per rank, and a log beside them joins the
// run of its rank: grouping is indexed, not a scan of every run per file
// (which was quadratic in ranks).
func TestGroupManyRanks(t *testing.T) {
	const n = 5000
	var ins []*Input
	for r := range int64(n) {
		ins = append(ins,
			&Input{Source: fmt.Sprintf("run/vm_rank%d.pt.trace.json.gz", r), Kind: SourceTrace, Rank: r},
			&Input{Source: fmt.Sprintf("run/vm_rank%d.steps.jsonl", r), Kind: "steps", Rank: r})
	}
	ins = append(ins, &Input{Source: "run/train.log", Kind: "memory-summary", Rank: 42})
	groups := groupInputs(ins)
	if len(groups) != n {
		t.Fatalf("%d groups, want %d", len(groups), n)
	}
	for _, g := range groups {
		want := 2
		if g.Rank == 42 {
			want = 3
		}
		if len(g.Inputs) != want {
			t.Errorf("rank %d: %d inputs, want %d", g.Rank, len(g.Inputs), want)
		}
	}
}
