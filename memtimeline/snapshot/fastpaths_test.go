package snapshot

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// TestFastPathsOnRealSnapshots: the path a large snapshot takes (the file
// read ahead on a goroutine past aheadAfter) gives what the plain path
// gives, on every real pickle in testdata, and each trace reads the same
// entry by entry (At) as in order (All). Those are all smaller than the
// threshold, so the test lowers it; the 1 GB bench input is checked by
// hand.
func TestFastPathsOnRealSnapshots(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"snapshots/*.pickle*", "gpu/*/*.pickle*", "gpu/*/*/*.pickle*"} {
		m, _ := filepath.Glob(filepath.Join("..", "..", "testdata", filepath.FromSlash(pattern)))
		paths = append(paths, m...)
	}
	if len(paths) < 5 {
		t.Fatalf("only %d snapshots in testdata", len(paths))
	}
	entries := 0
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		plain := memtest.Decode(t, p, Read)
		ahead := aheadAfter
		aheadAfter = 4 << 10
		fast := memtest.Decode(t, p, Read)
		aheadAfter = ahead
		if !reflect.DeepEqual(plain, fast) {
			t.Errorf("%s: read ahead, the snapshot differs from the plain read", p)
		}
		for d, tr := range fast.DeviceTraces {
			n := 0
			for i, e := range tr.All() {
				if i != n || !reflect.DeepEqual(e, tr.At(i)) {
					t.Fatalf("%s: device %d: entry %d (the %dth in order) reads differently by index", p, d, i, n)
				}
				n++
			}
			if n != tr.Len() {
				t.Errorf("%s: device %d: %d entries in order, Len %d", p, d, n, tr.Len())
			}
			entries += n
		}
	}
	if entries == 0 {
		t.Fatal("no snapshot had entries")
	}
}
