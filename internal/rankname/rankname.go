// Package rankname reads a distributed rank from a file or folder name,
// the one way every package does: "host_rank3_step10.pt.trace.json.gz",
// "rank3/trace.json.gz", TorchTitan's "000003_step_10.pickle".
package rankname

import (
	"path/filepath"
	"regexp"
	"strconv"
)

// inName is "rank" and a number in a name: rank3, rank_3, RANK-3.
var inName = regexp.MustCompile(`(?i)rank[_-]?(\d+)`)

// titan is TorchTitan's snapshot name, <rank:06d>_step_<N>.pickle
// (torchtitan/tools/profiler.py), which has no "rank" in it.
var titan = regexp.MustCompile(`^(\d+)_step_\d+\.pickle`)

// InName is the rank a name (one path element) carries, and whether it
// carries one.
func InName(name string) (int64, bool) {
	m := inName.FindStringSubmatch(name)
	if m == nil {
		return -1, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	return n, err == nil
}

// IsFolder says whether name is a per-rank folder's whole name ("rank3",
// as in job/rank3/trace.json.gz).
func IsFolder(name string) bool {
	loc := inName.FindStringIndex(name)
	return loc != nil && loc[0] == 0 && loc[1] == len(name)
}

// FromPath reads a rank from a path's file name ("host_rank3_step10", a
// TorchTitan snapshot's "000003_step_10.pickle"), else from its folder's
// ("rank3/trace.json"), or returns -1.
func FromPath(path string) int64 {
	if m := titan.FindStringSubmatch(filepath.Base(path)); m != nil {
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			return n
		}
	}
	for _, s := range []string{filepath.Base(path), filepath.Base(filepath.Dir(path))} {
		if n, ok := InName(s); ok {
			return n
		}
	}
	return -1
}
