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
// members inflated in parallel where there are more than 2 CPUs, sized
// from the total it names, into the very trace its plain JSON gives; with
// 2 CPUs it is read as one stream, to the same trace.
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
	for _, procs := range []int{4, 2} {
		prev := runtime.GOMAXPROCS(procs)
		in, err := Open(path)
		if err != nil {
			runtime.GOMAXPROCS(prev)
			t.Fatal(err)
		}
		parallel := in.ahead == nil // the one-stream path reads ahead
		tr, err := Read(in, ReadOptions{})
		in.Close()
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatalf("GOMAXPROCS %d: %v", procs, err)
		}
		if parallel != (procs > 2) {
			t.Errorf("GOMAXPROCS %d: members inflated in parallel: %v", procs, parallel)
		}
		if in.sizeHint != int64(len(data)) {
			t.Errorf("GOMAXPROCS %d: size hint %d, want the %d bytes the file names", procs, in.sizeHint, len(data))
		}
		var got bytes.Buffer
		WriteCanonical(&got, tr)
		if got.String() != want {
			t.Errorf("GOMAXPROCS %d: the indexed gzip's trace differs from the plain JSON's", procs)
		}
	}
}
