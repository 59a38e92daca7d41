package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/torchmem/torchmem/cmd/torchmem/load"
)

// checkOutput refuses an -o path that is one of the inputs: the file
// itself named as an input (by any path: links, ./x, ../d/x), or a file of
// a kind torchmem reads inside an input directory. Writing the page there
// would destroy the trace it was made from ('report x.json -o x.json').
// It runs before anything is read, so the command stops at once (exit 2).
func checkOutput(output string, inputs []string) error {
	if output == "" {
		return nil
	}
	ost, err := os.Stat(output)
	if err != nil {
		return nil // a new file cannot be an input
	}
	if ost.IsDir() {
		return badInput(fmt.Errorf("-o %s: is a directory; name the file to write", output))
	}
	absOut, _ := filepath.Abs(output)
	for _, in := range inputs {
		if in == load.Stdin {
			continue
		}
		ist, err := os.Stat(in)
		if err != nil {
			continue // the loader reports it
		}
		if os.SameFile(ost, ist) {
			return badInput(fmt.Errorf("-o %s is the input %s: torchmem never overwrites an input; write the output elsewhere", output, in))
		}
		if !ist.IsDir() {
			continue
		}
		absIn, _ := filepath.Abs(in)
		if rel, err := filepath.Rel(absIn, absOut); err == nil && !strings.HasPrefix(rel, "..") {
			if r, err := load.Open(output, &load.Options{}); err == nil {
				kind := r.Kind
				r.Close()
				if kind != load.Unknown {
					return badInput(fmt.Errorf("-o %s is %s inside the input directory %s: torchmem never overwrites an input; write the output elsewhere", output, kind.Describe(), in))
				}
			}
		}
	}
	return nil
}
