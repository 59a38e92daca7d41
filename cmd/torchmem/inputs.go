package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// expandInputs turns the command line's files and directories into files.
// A directory stands for the traces in it (per-rank exports): files whose
// names end in .json or .json.gz, and allocator snapshots (.pickle).
func expandInputs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, badInput(describeOpenError(a, err))
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, badInput(fmt.Errorf("%s: %w", a, err))
		}
		var found []string
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || strings.HasPrefix(n, ".") {
				continue
			}
			if strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".json.gz") || strings.HasSuffix(n, ".pickle") {
				found = append(found, filepath.Join(a, n))
			}
		}
		if len(found) == 0 {
			return nil, badInput(fmt.Errorf("%s: no .json, .json.gz or .pickle files in this directory", a))
		}
		slices.Sort(found)
		out = append(out, found...)
	}
	return out, nil
}

var rankInName = regexp.MustCompile(`(?i)rank[_-]?(\d+)`)

// rankFromName reads a rank number from a file name ("host_rank3_step10"),
// or returns -1.
func rankFromName(path string) int64 {
	m := rankInName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return -1
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return -1
	}
	return n
}
