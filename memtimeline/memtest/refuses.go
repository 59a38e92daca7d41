package memtest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// Refuses checks, as subtest name, that read refuses in with an error that
// says want, and that errors.Is(err, notKind) is isNotKind (so that the
// loader skips a file of another kind and reports a broken one of this
// kind). notKind is the reader's "not this kind" error (ErrNotLog).
func Refuses[T any](t *testing.T, read func(io.Reader) (T, error), notKind error, name, in, want string, isNotKind bool) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		got, err := read(strings.NewReader(in))
		if err == nil {
			t.Fatalf("no error; read %+v", got)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
		if isNotKind != errors.Is(err, notKind) {
			t.Errorf("error %q: errors.Is(%v) = %v, want %v", err, notKind, !isNotKind, isNotKind)
		}
	})
}

// Accepts runs read on data for a fuzz target: it returns what read
// returned and true when read accepts data; when read refuses it, it
// checks that nothing came with the error and returns false.
func Accepts[T comparable](t *testing.T, read func(io.Reader) (T, error), data []byte) (T, bool) {
	t.Helper()
	got, err := read(bytes.NewReader(data))
	if err != nil {
		var zero T
		if got != zero {
			t.Fatalf("both %v and error %v returned", got, err)
		}
		return zero, false
	}
	return got, true
}
