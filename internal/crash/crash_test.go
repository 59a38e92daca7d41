package crash

import (
	"strings"
	"testing"
)

// A panic in a Group's goroutine reaches the caller of Wait as a *Bug
// (not the runtime's crash of the whole process), with its stack.
func TestGroupCarriesPanicToWait(t *testing.T) {
	var g Group
	g.Go(func() {})
	g.Go(func() { panic("boom") })
	b := Run("trace.json", g.Wait)
	if b == nil || b.Value != "boom" || b.File != "trace.json" || !strings.Contains(string(b.Stack), "crash_test.go") {
		t.Fatalf("got %+v", b)
	}
	if Run("x", func() {}) != nil {
		t.Fatal("a function that returns is no bug")
	}
}
