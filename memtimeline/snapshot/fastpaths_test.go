package snapshot

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

// TestFastPathsOnRealSnapshots: the paths a large snapshot takes (the file
// read ahead on a goroutine past aheadAfter, a device's entries unpacked
// on every CPU past minUnpackPart each) give what the plain paths give, on
// every real pickle in testdata. Those are all smaller than the thresholds,
// so the test lowers them; the 1 GB bench input is checked by hand.
func TestFastPathsOnRealSnapshots(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"snapshots/*.pickle*", "gpu/*/*.pickle*", "gpu/*/*/*.pickle*"} {
		m, _ := filepath.Glob(filepath.Join("..", "..", "testdata", filepath.FromSlash(pattern)))
		paths = append(paths, m...)
	}
	if len(paths) < 5 {
		t.Fatalf("only %d snapshots in testdata", len(paths))
	}
	read := func(p string) *Snapshot {
		in, err := chrometrace.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		s, err := Read(in)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return s
	}
	parted := 0
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		plain := read(p)
		ahead, part := aheadAfter, minUnpackPart
		aheadAfter, minUnpackPart = 4<<10, 64
		fast := read(p)
		aheadAfter, minUnpackPart = ahead, part
		if !reflect.DeepEqual(plain, fast) {
			t.Errorf("%s: read ahead and unpacked in parts, the snapshot differs from the plain read", p)
		}
		for _, d := range plain.DeviceTraces {
			if len(d) >= 2*64 {
				parted++
				break
			}
		}
	}
	if parted == 0 {
		t.Fatal("no snapshot had entries enough to unpack in parts")
	}
}
