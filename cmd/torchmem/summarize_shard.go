package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/internal/rankname"
)

// shard is one task's part of the inputs in a cluster array job: the
// inputs whose rank, read from the path (rank3_..., rank3/...), is Index
// modulo Count; inputs without a rank in their path go to shard 0.
type shard struct{ Index, Count int64 }

// parseShard reads "I/N" (0 <= I < N).
func parseShard(s string) (shard, error) {
	i, n, ok := strings.Cut(s, "/")
	idx, err1 := strconv.ParseInt(strings.TrimSpace(i), 10, 64)
	cnt, err2 := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
	if !ok || err1 != nil || err2 != nil || cnt < 1 || idx < 0 || idx >= cnt {
		return shard{}, fmt.Errorf("--shard %q: want I/N with 0 <= I < N, e.g. 3/16", s)
	}
	return shard{idx, cnt}, nil
}

// pick keeps the sources of this shard and their summary names. The
// names are computed over all inputs first, so that two tasks never
// choose the same name for different files.
func (s shard) pick(srcs []load.Source, names []string) ([]load.Source, []string) {
	var keepSrcs []load.Source
	var keepNames []string
	for i, src := range srcs {
		if max(0, rankname.FromPath(src.Path))%s.Count == s.Index {
			keepSrcs = append(keepSrcs, src)
			keepNames = append(keepNames, names[i])
		}
	}
	return keepSrcs, keepNames
}
