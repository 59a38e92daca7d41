package memtest

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

// Testdata is the path of elem under the repository's testdata/, relative
// to the working directory (a test's package folder) when it can be, so
// that failures name short paths.
func Testdata(elem ...string) string {
	return filepath.Join(append([]string{moduleRoot(), "testdata"}, elem...)...)
}

// moduleRoot is the repository's root: two folders above this file, or,
// where the build trimmed file paths (-trimpath), the nearest folder above
// the working directory that holds go.mod.
func moduleRoot() string {
	cwd, err := os.Getwd()
	if err != nil {
		return "."
	}
	var root string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root = filepath.Join(filepath.Dir(file), "..", "..")
	} else {
		for dir := cwd; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root = dir
				break
			}
			if filepath.Dir(dir) == dir {
				return "."
			}
		}
	}
	if rel, err := filepath.Rel(cwd, root); err == nil {
		return rel
	}
	return root
}

// ReadAll is the whole content of the file at path, gunzipped when it is
// gzip (by its magic bytes, as the readers decide), failing the test on
// error.
func ReadAll(t testing.TB, path string) []byte {
	t.Helper()
	return Decode(t, path, io.ReadAll)
}

// Decode reads the file at path (gzipped or not) with read, failing the
// test with the file's name on error: Decode(t, path, snapshot.Read).
func Decode[T any](t testing.TB, path string, read func(io.Reader) (T, error)) T {
	t.Helper()
	in, err := chrometrace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	v, err := read(in)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// Trace reads a Chrome trace (gzipped or not), failing the test on error.
func Trace(t testing.TB, path string) *chrometrace.Trace {
	t.Helper()
	return Decode(t, path, func(r io.Reader) (*chrometrace.Trace, error) {
		return chrometrace.Read(r, chrometrace.ReadOptions{})
	})
}

// NamedTrace reads testdata/traces/<name>/trace.json.gz.
func NamedTrace(t testing.TB, name string) *chrometrace.Trace {
	t.Helper()
	return Trace(t, Testdata("traces", name, "trace.json.gz"))
}

// GPUTrace reads testdata/gpu/<rel>/trace.json.gz (the H200 recordings).
func GPUTrace(t testing.TB, rel string) *chrometrace.Trace {
	t.Helper()
	return Trace(t, Testdata("gpu", rel, "trace.json.gz"))
}

// NamedSnapshot is the path of testdata/snapshots/<name>.pickle.gz (read it
// with Decode(t, path, snapshot.Read)).
func NamedSnapshot(name string) string {
	return Testdata("snapshots", name+".pickle.gz")
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
	return chrometrace.InnermostFrame(stack)
}

// RunDir is a fresh copy of the snippet's output directory (two trace
// windows, a snapshot, a per-step log) plus the unrelated JSON a user's run
// directory also holds: a config.json and a truth.json.
func RunDir(t testing.TB) string {
	t.Helper()
	src := Testdata("gpu", "snippet_proof", "gpu")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, e := range entries {
		write(e.Name(), read(filepath.Join(src, e.Name())))
	}
	write("config.json", []byte(`{"lr": 0.1, "batch_size": 256}`))
	write("truth.json", read(Testdata("gpu", "leak_retain_graph", "truth.json")))
	return dir
}

// WriteFile writes data to dir/name, failing the test on error, and
// returns the file's path: a synthetic input for a test.
func WriteFile[D string | []byte](t testing.TB, dir, name string, data D) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ReadJSON unmarshals the JSON file at path (gzipped or not) into v with
// encoding/json, failing the test with the file's name on error: the
// truth.json and oracle files next to the recordings.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(ReadAll(t, path), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Allocated is how many bytes of heap fn allocates (the runtime's
// cumulative count, so freed memory counts too): fuzz targets bound it by
// the input's length, so that an input that costs memory out of
// proportion to its size fails like one that panics.
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
