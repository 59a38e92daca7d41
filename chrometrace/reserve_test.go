package chrometrace

import (
	"bytes"
	"path/filepath"
	"testing"
)

// A trace read with its record lists sized from a size hint (right, too
// small: the lists outgrow their slices, too large) is the trace read
// without one.
func TestReserveKeepsTrace(t *testing.T) {
	defer func(m int64, c, mc int) { reserveMin, specChunkBytes, maxSpecChunkBytes = m, c, mc }(reserveMin, specChunkBytes, maxSpecChunkBytes)
	// Batches of 64 KiB: the lists are sized after a few of them.
	reserveMin, specChunkBytes, maxSpecChunkBytes = 1, 64<<10, 4<<20
	for _, name := range []string{"leak_module_cache", "resnet_train_clean"} {
		data := gunzipFile(t, filepath.Join("..", "testdata", "traces", name, "trace.json.gz"))
		render := func(hint int64) string {
			in, err := NewInput(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			in.sizeHint = hint
			tr, err := Read(in, ReadOptions{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			if tr.reservedLists != (hint > 0) {
				t.Fatalf("%s hint %d: reserved %v", name, hint, tr.reservedLists)
			}
			var buf bytes.Buffer
			WriteCanonical(&buf, tr)
			return buf.String()
		}
		want := render(0)
		n := int64(len(data))
		for _, hint := range []int64{n, n / 6, 4 * n} {
			if got := render(hint); got != want {
				t.Errorf("%s: hint %d of %d bytes changes the trace", name, hint, n)
			}
		}
	}
}
