package memtest

import (
	"sync"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

// Reading a large real trace, or its oracle with encoding/json, costs
// seconds; tests of one package that only read it share one copy.

// sharedInputs holds what SharedTrace and SharedOracle read, by kind and
// path, once per test binary.
var sharedInputs sync.Map // sharedKey -> *sharedInput

type sharedKey struct{ kind, path string }

type sharedInput struct {
	once sync.Once
	v    any
	err  error
}

func shared[T any](t testing.TB, kind, path string, read func(string) (T, error)) T {
	t.Helper()
	e, _ := sharedInputs.LoadOrStore(sharedKey{kind, path}, &sharedInput{})
	in := e.(*sharedInput)
	in.once.Do(func() { in.v, in.err = read(path) })
	if in.err != nil {
		t.Fatalf("%s: %v", path, in.err)
	}
	return in.v.(T)
}

// SharedTrace is Trace read once per test binary: the same *Trace to every
// caller, which must not change it (a test that edits a trace reads its own
// with Trace).
func SharedTrace(t testing.TB, path string) *chrometrace.Trace {
	t.Helper()
	return shared(t, "trace", path, func(path string) (*chrometrace.Trace, error) {
		in, err := chrometrace.Open(path)
		if err != nil {
			return nil, err
		}
		defer in.Close()
		return chrometrace.Read(in, chrometrace.ReadOptions{})
	})
}

// SharedOracle is ReadOracle read once per test binary, shared like
// SharedTrace.
func SharedOracle(t testing.TB, path string) *Oracle {
	t.Helper()
	return shared(t, "oracle", path, readOracle)
}
