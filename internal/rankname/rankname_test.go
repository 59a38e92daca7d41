package rankname

import "testing"

func TestFromPath(t *testing.T) {
	for path, want := range map[string]int64{
		"testdata/gpu/multirank/ddp4_leak/host_rank2_step10.pt.trace.json.gz": 2,
		"job/rank3/trace.json.gz":            3,
		"job/RANK_12/run.steps.jsonl":        12,
		"outputs/000003_step_10.pickle":      3,
		"trace.json.gz":                      -1,
		"job/ranks/trace.json.gz":            -1,
		"job/rank1/host_rank4_trace.json.gz": 4, // the file's name first
		"vm_rank3_step10.pt.trace.json.gz":   3,
		"host-rank-12.pickle":                12,
		"ddp_one_rank_leaks/trace.json":      -1,
	} {
		if got := FromPath(path); got != want {
			t.Errorf("FromPath(%q) = %d, want %d", path, got, want)
		}
	}
	for name, want := range map[string]bool{"rank3": true, "Rank-3": true, "rank3_old": false, "myrank3": false, "rank": false} {
		if got := IsFolder(name); got != want {
			t.Errorf("IsFolder(%q) = %v, want %v", name, got, want)
		}
	}
}
