// Package testinput reads the repository's recorded inputs for the tests
// of rules and its analyses (rules/leak, rules/frag, rules/gpu,
// rules/diff), one way and at any package depth.
package testinput

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"

	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// Testdata is the path of elem under the repository's testdata/.
func Testdata(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if rel, err := filepath.Rel(mustAbs("."), root); err == nil {
		root = rel
	}
	return filepath.Join(append([]string{root, "testdata"}, elem...)...)
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// Trace reads a Chrome trace (gzipped or not), failing the test on error.
func Trace(t testing.TB, path string) *chrometrace.Trace {
	t.Helper()
	in, err := chrometrace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tr, err := chrometrace.Read(in, chrometrace.ReadOptions{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tr
}

// NamedTrace reads testdata/traces/<name>/trace.json.gz.
func NamedTrace(t testing.TB, name string) *chrometrace.Trace {
	t.Helper()
	return Trace(t, Testdata("traces", name, "trace.json.gz"))
}

// Snapshot reads an allocator snapshot pickle (gzipped or not).
func Snapshot(t testing.TB, path string) *snapshot.Snapshot {
	t.Helper()
	in, err := chrometrace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	s, err := snapshot.Read(in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// NamedSnapshot reads testdata/snapshots/<name>.pickle.gz.
func NamedSnapshot(t testing.TB, name string) *snapshot.Snapshot {
	t.Helper()
	return Snapshot(t, Testdata("snapshots", name+".pickle.gz"))
}

// GlobOne is the one file in dir matching pattern.
func GlobOne(t testing.TB, dir, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) != 1 {
		t.Fatalf("%s/%s: %v %v", dir, pattern, m, err)
	}
	return m[0]
}

// LastFrame is a stack's innermost frame.
func LastFrame(stack []string) string {
	if len(stack) == 0 {
		return "(no Python stack)"
	}
	return stack[len(stack)-1]
}

// GPUTrace reads testdata/gpu/<rel>/trace.json.gz (the H200 recordings).
func GPUTrace(t testing.TB, rel string) *chrometrace.Trace {
	t.Helper()
	return Trace(t, Testdata("gpu", rel, "trace.json.gz"))
}

// StepLog reads a per-step memory log (steps JSONL).
func StepLog(t testing.TB, path string) *steplog.Log {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log, err := steplog.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return log
}
