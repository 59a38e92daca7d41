// Package crash turns a panic into a report of a bug in torchmem. A panic
// is never the input's fault: a reader refuses bad input with an error.
// The command line recovers at its top (exit code 3, distinct from 2, bad
// input); goroutines that work for a caller carry their panic back to it
// (Group), so that it too reaches the top instead of killing the process
// with the runtime's trace and exit code 2.
package crash

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// Bug is a recovered panic: its value, the stack where it happened and,
// when known, the file being read.
type Bug struct {
	Value any
	Stack []byte
	File  string
}

func (b *Bug) Error() string {
	if b.File != "" {
		return fmt.Sprintf("bug in torchmem while reading %s: %v", b.File, b.Value)
	}
	return fmt.Sprintf("bug in torchmem: %v", b.Value)
}

// Recovered makes a *Bug of a value recover returned (nil stays nil); a
// *Bug passes as it is, keeping the stack where it first happened.
func Recovered(r any, file string) *Bug {
	if r == nil {
		return nil
	}
	if b, ok := r.(*Bug); ok {
		if b.File == "" {
			b.File = file
		}
		return b
	}
	return &Bug{Value: r, Stack: debug.Stack(), File: file}
}

// Run calls f and returns its panic as a *Bug naming file (nil when f
// returns).
func Run(file string, f func()) (bug *Bug) {
	defer func() { bug = Recovered(recover(), file) }()
	f()
	return nil
}

// Group runs functions in goroutines like a sync.WaitGroup; Wait re-raises
// in the caller's goroutine the first panic among them (as a *Bug).
type Group struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	first *Bug
}

// Go runs f in a goroutine.
func (g *Group) Go(f func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if b := Run("", f); b != nil {
			g.mu.Lock()
			if g.first == nil {
				g.first = b
			}
			g.mu.Unlock()
		}
	}()
}

// Wait waits for every function and panics with the first one's *Bug.
func (g *Group) Wait() {
	g.wg.Wait()
	if g.first != nil {
		panic(g.first)
	}
}
