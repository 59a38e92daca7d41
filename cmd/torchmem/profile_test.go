package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

// TestProfilesOnRequest: the environment variables write a CPU profile,
// an execution trace and a heap profile of a run reading a real trace;
// a path that cannot be written is a warning, and the run goes on.
func TestProfilesOnRequest(t *testing.T) {
	dir := t.TempDir()
	paths := map[string]string{
		"TORCHMEM_CPUPROFILE": filepath.Join(dir, "cpu.prof"),
		"TORCHMEM_EXECTRACE":  filepath.Join(dir, "exec.trace"),
		"TORCHMEM_MEMPROFILE": filepath.Join(dir, "mem.prof"),
	}
	for env, p := range paths {
		t.Setenv(env, p)
	}
	stop := startProfiles()
	in, err := chrometrace.Open(filepath.Join("..", "..", "examples", "traces", "leak_module_cache.trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chrometrace.Read(in, chrometrace.ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	in.Close()
	stop()
	for env, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		// pprof profiles are gzipped protobuf; an execution trace starts
		// with its header.
		want := []byte{0x1f, 0x8b}
		if env == "TORCHMEM_EXECTRACE" {
			want = []byte("go 1.")
		}
		if !bytes.HasPrefix(b, want) {
			t.Errorf("%s: %d bytes starting %q, want %q", env, len(b), b[:min(len(b), 8)], want)
		}
	}

	t.Setenv("TORCHMEM_CPUPROFILE", filepath.Join(dir, "no", "such", "dir", "cpu.prof"))
	t.Setenv("TORCHMEM_EXECTRACE", "")
	t.Setenv("TORCHMEM_MEMPROFILE", "")
	if f := startTo("TORCHMEM_CPUPROFILE", func(io.Writer) error { return nil }); f != nil {
		t.Error("a profile path in a missing directory gave a file")
	}
}
