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
// A directory stands for the files torchmem reads in it, such as what the
// snippet writes: traces (.json, .json.gz), allocator snapshots (.pickle),
// per-step logs (.jsonl) and nvidia-smi logs (.csv), gzipped or not.
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
			base := strings.TrimSuffix(n, ".gz")
			for _, ext := range readableExtensions {
				if strings.HasSuffix(base, ext) {
					found = append(found, filepath.Join(a, n))
					break
				}
			}
		}
		if len(found) == 0 {
			return nil, badInput(fmt.Errorf("%s: no %s files in this directory", a, strings.Join(readableExtensions, ", ")))
		}
		slices.Sort(found)
		out = append(out, found...)
	}
	return out, nil
}

// readableExtensions are the file endings a directory is searched for
// (each may also end in .gz); content decides what a file is.
var readableExtensions = []string{".json", ".jsonl", ".pickle", ".csv"}

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
