package rules

import (
	"path/filepath"
	"regexp"
	"strconv"
)

// Framework dump trees, read as they are. Most people who would use
// torchmem already have memory files written by their framework, in one
// folder per dump rather than one per run:
//
//   - TorchTitan (torchtitan/tools/profiling.py, through 2026-06):
//     <dump>/memory_snapshot/iteration_<N>/rank<R>_memory_snapshot.pickle,
//     iteration_<N>_exit/ when it dumps on an OOM, and
//     <dump>/profile_traces/iteration_<N>/rank<R>_trace.json;
//   - TorchTitan (torchtitan/tools/profiler.py, since 2026-08):
//     <dump>/profiling/memory_snapshot/step_<N:012d>/<R:06d>_step_<N>.pickle
//     (step_<N>_exit/ on an OOM), <dump>/profiling/traces/iteration_<N>/rank<R>_trace.json.gz;
//   - torchtune (torchtune/training/_profiler.py): <out>/iteration_<N>/ holds
//     rank0_memory_snapshot.pickle beside r<R>-<date>.<ns>.pt.trace.json.gz.
//
// Either may put a leaf folder under the iteration folder. A file in such
// a tree belongs to the dump's root (the folder above memory_snapshot,
// profile_traces or the iteration folders), is one run per root grouped by
// rank, and carries the iteration it was dumped at.

// iterationDir is a dump folder: iteration_<N>, step_<N>, with _exit on an OOM.
var iterationDir = regexp.MustCompile(`^(?:iteration|step)_(\d+)(_exit)?$`)

// dumpKindDirs are the folders a framework puts its iteration folders in.
var dumpKindDirs = map[string]bool{
	"memory_snapshot": true, "memory_snapshots": true, "profile_traces": true, "profile_trace": true,
	"traces": true, "snapshots": true,
}

// dumpPlace is where a file sits in a framework's dump tree.
type dumpPlace struct {
	// Root is the dump's root folder: the files of one root are one run.
	Root string
	// Iteration is the step the dump was taken at.
	Iteration int64
	// Exit: dumped on the way out of an OOM (iteration_<N>_exit).
	Exit bool
}

// dumpPlaceOf says where path sits in a framework dump tree; ok is false
// for a file in no iteration folder.
func dumpPlaceOf(path string) (dumpPlace, bool) {
	dir := filepath.Dir(path)
	// The iteration folder, or its parent when a leaf folder follows it.
	for range 2 {
		if m := iterationDir.FindStringSubmatch(filepath.Base(dir)); m != nil {
			n, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				return dumpPlace{}, false
			}
			root := filepath.Dir(dir)
			if dumpKindDirs[filepath.Base(root)] {
				root = filepath.Dir(root)
				if filepath.Base(root) == "profiling" {
					root = filepath.Dir(root)
				}
			}
			return dumpPlace{Root: root, Iteration: n, Exit: m[2] != ""}, true
		}
		dir = filepath.Dir(dir)
	}
	return dumpPlace{}, false
}

// stepInName reads the step a file was dumped at from its name, for
// series saved by hand ("snap_step30.pickle", "iter_200.pickle") and
// TorchTitan's newer names (000001_step_30.pickle).
var stepInName = regexp.MustCompile(`(?i)(?:^|[^a-z])(?:iteration|iter|step|it)[_-]?(\d+)(?:[^0-9]|$)`)

// dumpStepOf is the step path was dumped at: its iteration folder's, else
// one in its name; -1 when neither says.
func dumpStepOf(path string) int64 {
	if p, ok := dumpPlaceOf(path); ok {
		return p.Iteration
	}
	if m := stepInName.FindStringSubmatch(filepath.Base(path)); m != nil {
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			return n
		}
	}
	return -1
}

// groupDir is the folder a file's run is keyed by: a dump tree's root,
// else its own folder.
func groupDir(path string) string {
	if p, ok := dumpPlaceOf(path); ok {
		return p.Root
	}
	return filepath.Dir(path)
}
