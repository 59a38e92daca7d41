package chrometrace

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/torchmem/torchmem/internal/gzmembers"
)

// TestIndexedGzipTrace: a real trace gzipped as the snippet writes it
// (members naming their sizes, the total at the end) is read with its
// members inflated in parallel where its share of the CPUs is over 2
// (GOMAXPROCS, or what the loader gives a trace read beside others), sized
// from the total it names, into the very trace its plain JSON gives; with
// a share of 2 it is read as one stream, to the same trace.
func TestIndexedGzipTrace(t *testing.T) {
	data := gunzipFile(t, filepath.Join("..", "testdata", "traces", "leak_module_cache", "trace.json.gz"))
	var file bytes.Buffer
	z, err := gzmembers.NewWriterSize(&file, 6, 64<<10) // many members from a small trace
	if err != nil {
		t.Fatal(err)
	}
	z.Write(data)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trace.json.gz")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, want := readWithHint(t, data, 0)
	// cpus 0 is GOMAXPROCS, set here; 2 is a trace's share beside others.
	for _, c := range []struct{ procs, cpus int }{{4, 0}, {2, 0}, {4, 2}, {1, 3}} {
		prev := runtime.GOMAXPROCS(c.procs)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		in, err := NewInputCPUs(f, c.cpus)
		if err != nil {
			runtime.GOMAXPROCS(prev)
			t.Fatal(err)
		}
		parallel := in.ahead == nil // the one-stream path reads ahead
		tr, err := Read(in, ReadOptions{})
		in.Close()
		f.Close()
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		cpus := c.cpus
		if cpus == 0 {
			cpus = c.procs
		}
		if parallel != (cpus > 2) {
			t.Errorf("%+v: members inflated in parallel: %v", c, parallel)
		}
		if in.sizeHint != int64(len(data)) {
			t.Errorf("%+v: size hint %d, want the %d bytes the file names", c, in.sizeHint, len(data))
		}
		var got bytes.Buffer
		WriteCanonical(&got, tr)
		if got.String() != want {
			t.Errorf("%+v: the indexed gzip's trace differs from the plain JSON's", c)
		}
	}
}
