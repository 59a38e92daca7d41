// Package ranksynth makes many ranks of a distributed job out of two
// recorded ones, for tests of the multi-rank paths: each rank is a copy of
// a recorded trace with the rank and world size in its distributedInfo
// rewritten. The copies are written where the caller says (a test's
// temporary directory): they are never committed.
package ranksynth

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// distributedRank and worldSize match the fields of the trace's
// distributedInfo (the first "rank" and "world_size" keys of the file).
var (
	distributedRank = regexp.MustCompile(`"rank":\s*\d+`)
	worldSize       = regexp.MustCompile(`"world_size":\s*\d+`)
)

// Recording is a recorded 2-rank job: one rank's trace that is clean and
// one that leaks.
type Recording struct {
	Clean, Leaking string
}

// DDPOneRankLeaks is testdata/gpu/ddp_one_rank_leaks, from the repository
// root: rank 1 keeps 8 MiB per step, rank 0 none.
func DDPOneRankLeaks(root string) Recording {
	dir := filepath.Join(root, "testdata", "gpu", "ddp_one_rank_leaks")
	return Recording{Clean: filepath.Join(dir, "rank0", "trace.json.gz"), Leaking: filepath.Join(dir, "rank1", "trace.json.gz")}
}

// Write writes n ranks into dir, rank r as dir/rank<r>/trace.json.gz,
// copies of the leaking trace for the ranks in leaking and of the clean one
// for the others, each with distributedInfo's rank set to r and world_size
// to n. It returns the paths in rank order.
func Write(dir string, rec Recording, n int, leaking ...int) ([]string, error) {
	clean, err := readGz(rec.Clean)
	if err != nil {
		return nil, err
	}
	leak, err := readGz(rec.Leaking)
	if err != nil {
		return nil, err
	}
	isLeaking := map[int]bool{}
	for _, r := range leaking {
		isLeaking[r] = true
	}
	var out []string
	for r := 0; r < n; r++ {
		src := clean
		if isLeaking[r] {
			src = leak
		}
		b := replaceFirst(src, distributedRank, fmt.Sprintf(`"rank": %d`, r))
		b = replaceFirst(b, worldSize, fmt.Sprintf(`"world_size": %d`, n))
		path := filepath.Join(dir, fmt.Sprintf("rank%d", r), "trace.json.gz")
		if err := writeGz(path, b); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

func replaceFirst(b []byte, re *regexp.Regexp, with string) []byte {
	loc := re.FindIndex(b)
	if loc == nil {
		return b
	}
	out := make([]byte, 0, len(b)+len(with))
	out = append(out, b[:loc[0]]...)
	out = append(out, with...)
	return append(out, b[loc[1]:]...)
}

func readGz(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(zr)
}

func writeGz(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
