package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/internal/gzmembers"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// TestSnapshotInMembers: a real allocator snapshot gzipped as the snippet
// writes it (members naming their sizes) reads into the same Snapshot as
// its one-stream original, its members inflated in parallel (GOMAXPROCS 4)
// or as one stream (2).
func TestSnapshotInMembers(t *testing.T) {
	path := memtest.Testdata("snapshots", "frag_small_allocs.pickle.gz")
	want := memtest.Decode(t, path, Read)
	if len(want.Segments) == 0 || len(want.DeviceTraces) == 0 || want.DeviceTraces[0].Len() == 0 {
		t.Fatal("the snapshot has no segments or no history: the comparison would prove nothing")
	}
	var file bytes.Buffer
	z, err := gzmembers.NewWriterSize(&file, 6, 256<<10) // several members from a small file
	if err != nil {
		t.Fatal(err)
	}
	z.Write(memtest.ReadAll(t, path))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	members := filepath.Join(t.TempDir(), "snapshot.pickle.gz")
	if err := os.WriteFile(members, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, procs := range []int{4, 2} {
		prev := runtime.GOMAXPROCS(procs)
		in, err := chrometrace.Open(members)
		if err != nil {
			runtime.GOMAXPROCS(prev)
			t.Fatal(err)
		}
		got, err := Read(in)
		in.Close()
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatalf("GOMAXPROCS %d: %v", procs, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("GOMAXPROCS %d: the snapshot read from its members differs from the one-stream original", procs)
		}
	}
}
