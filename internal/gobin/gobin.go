// Package gobin gives tests the torchmem program to run, built once per
// source: from the go command's cache rather than linked by each test.
package gobin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Torchmem returns the path of cmd/torchmem built from this checkout, as
// `go run` builds it: the go command keeps the executables it builds for
// go run in its cache (Go 1.24 and later), and `-exec echo` prints where
// one lies instead of running it. With a warm cache nothing is linked;
// `go build -o` links every time (about 3 s of CPU a test). The first time
// go run prints a temporary copy it removes on exit; the second call finds
// the cached one. When neither comes back, it builds into t.TempDir(). go
// run's executable has no symbol table or DWARF: the same program.
//
// The file is shared: run it, never write it.
func Torchmem(t testing.TB) string {
	t.Helper()
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	const pkg = "github.com/torchmem/torchmem/cmd/torchmem"
	for range 2 {
		out, err := exec.Command(gocmd, "run", "-exec", "echo", pkg).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("go run -exec echo %s: %v\n%s", pkg, err, stderr)
		}
		if bin := strings.TrimSpace(string(out)); filepath.IsAbs(bin) {
			if _, err := os.Stat(bin); err == nil {
				return bin
			}
		}
	}
	bin := filepath.Join(t.TempDir(), "torchmem")
	if out, err := exec.Command(gocmd, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
