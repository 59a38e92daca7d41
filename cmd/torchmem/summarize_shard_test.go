package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/internal/rankname"
)

func TestParseShard(t *testing.T) {
	for in, want := range map[string]shard{"0/1": {0, 1}, "3/16": {3, 16}, " 1 / 2 ": {1, 2}} {
		if got, err := parseShard(in); err != nil || got != want {
			t.Errorf("%q: %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "1", "2/2", "-1/4", "1/0", "a/b", "1/2/3"} {
		if _, err := parseShard(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Every input lands in exactly one shard, a rank's files together, and
// each keeps the name it has among all inputs (two tasks never write the
// same summary name for different files).
func TestShardPick(t *testing.T) {
	paths := []string{"r/rank0/trace.json.gz", "r/rank1/trace.json.gz", "r/rank2/trace.json.gz", "r/rank2/snapshot.pickle", "r/notes.txt", "r/host_rank3_step5.json"}
	var srcs []load.Source
	names := make([]string, len(paths))
	for i, p := range paths {
		srcs = append(srcs, load.Source{Path: p, Dir: "r"})
		names[i] = "n" + p
	}
	seen := map[string]int{}
	for i := range int64(2) {
		got, gotNames := shard{i, 2}.pick(srcs, names)
		for k, s := range got {
			seen[s.Path]++
			if gotNames[k] != "n"+s.Path {
				t.Errorf("%s renamed %s", s.Path, gotNames[k])
			}
			if r := max(0, rankname.FromPath(s.Path)); r%2 != i {
				t.Errorf("shard %d got %s (rank %d)", i, s.Path, r)
			}
		}
	}
	for _, p := range paths {
		if seen[p] != 1 {
			t.Errorf("%s in %d shards", p, seen[p])
		}
	}
}

// A shard with nothing to do succeeds and says so; a bad --shard is exit 2.
func TestSummarizeShardFlag(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s")
	stdout, stderr, code := torchmem(t, "summarize", "--shard", "5/8", "-o", out, realTrace("leak_module_cache"))
	if code != 0 || !strings.Contains(stdout, "no inputs in this shard") {
		t.Errorf("empty shard: exit %d %s %s", code, stdout, stderr)
	}
	if _, _, code := torchmem(t, "summarize", "--shard", "8/8", "-o", out, realTrace("leak_module_cache")); code != exitBadInput {
		t.Errorf("--shard 8/8: exit %d", code)
	}
	stdout, _, code = torchmem(t, "summarize", "--shard", "0/8", "-o", out, realTrace("leak_module_cache"))
	files, _ := os.ReadDir(out)
	if code != 0 || len(files) != 1 || !slices.ContainsFunc(files, func(e os.DirEntry) bool { return strings.HasSuffix(e.Name(), ".summary.json.gz") }) {
		t.Errorf("shard 0: exit %d, %v\n%s", code, files, stdout)
	}
}
