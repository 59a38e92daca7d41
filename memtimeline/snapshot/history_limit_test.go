package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// TestHistoryLimit: a history longer than maxHistoryEntries (2^31-1: a
// replay keys entries by 32-bit index, which AddrMap.Set panics past) is
// refused as a *chrometrace.CountLimitError naming the count and the cap,
// not stored and never replayed. Snapshots read with the cap lowered to
// one entry fewer than they hold, each way a history is built: the pickle
// decoder's records (every real pickle's entries), a JSON snapshot, and
// a trace read from its dicts (no real pickle has one: tracePickle's
// first entry is written key by key); with the cap at their count they
// read as before.
func TestHistoryLimit(t *testing.T) {
	saved := maxHistoryEntries
	defer func() { maxHistoryEntries = saved }()
	mixed := filepath.Join(t.TempDir(), "mixed.pickle")
	if err := os.WriteFile(mixed, tracePickle(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		// exact: the error names the device trace and its count (a trace
		// read as a whole); else the records stop at the cap.
		exact bool
	}{
		{memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"), false},
		{memtest.Testdata("gpu", "round4", "snapshot_fields", "fields.snapshot.json.gz"), true},
		{mixed, true},
	} {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			maxHistoryEntries = saved
			plain := memtest.Decode(t, c.path, Read)
			// total: the entries stored, the traces' and (mixed) the
			// record a trace read from dicts copied.
			total, last := 0, 0
			for d, tr := range plain.DeviceTraces {
				if tr.Len() > 0 {
					total, last = tr.h.n, d
				}
			}
			if total < 2 {
				t.Fatalf("%d trace entries: too few to test the cap", total)
			}
			maxHistoryEntries = total - 1
			s, err := readPath(c.path)
			var ce *chrometrace.CountLimitError
			if !errors.As(err, &ce) {
				t.Fatalf("cap %d on %d entries: got error %v (snapshot read: %v); want a CountLimitError", total-1, total, err, s != nil)
			}
			want := fmt.Sprintf("more than %d trace entries", total-1)
			if ce.Limit != int64(total-1) || !strings.Contains(err.Error(), want) {
				t.Errorf("error %q (limit %d): want %q", err, ce.Limit, want)
			}
			if c.exact {
				tr := plain.DeviceTraces[last]
				want := fmt.Sprintf("device_traces[%d] has %d entries, with %d stored before them", last, tr.Len(), total-tr.Len())
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q: want %q", err, want)
				}
			}
			maxHistoryEntries = total
			if s, err := readPath(c.path); err != nil || !reflect.DeepEqual(s, plain) {
				t.Errorf("cap at its %d entries: %v (differs: %v)", total, err, err == nil)
			}
		})
	}
}

func readPath(path string) (*Snapshot, error) {
	in, err := chrometrace.Open(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return Read(in)
}
