package chrometrace

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestCraftedGzipSizeHint: a gzip trailer (ISIZE) claiming 4 GiB in a
// file of a few hundred KB is capped at maxGzipRatio times the file's
// size, what Read then sizes its record lists from; a real trace's
// trailer (5x to 30x) is its true size. Both read the trace the plain
// JSON gives (Read stops at the end of the JSON, before the trailer,
// so the inflater never checks the crafted ISIZE).
func TestCraftedGzipSizeHint(t *testing.T) {
	reserveEarly(t, 64<<10)
	path := filepath.Join("..", "testdata", "traces", "resnet_train_clean", "trace.json.gz")
	raw := readFile(t, path)
	data := gunzipFile(t, path)
	crafted := bytes.Clone(raw)
	binary.LittleEndian.PutUint32(crafted[len(crafted)-4:], math.MaxUint32)
	dir := t.TempDir()
	read := func(name string, file []byte) (int64, string, error) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, file, 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		hint := in.sizeHint
		tr, err := Read(in, ReadOptions{Workers: 2})
		if err != nil {
			return hint, "", err
		}
		var buf bytes.Buffer
		WriteCanonical(&buf, tr)
		return hint, buf.String(), nil
	}

	hint, got, err := read("real.json.gz", raw)
	if err != nil {
		t.Fatal(err)
	}
	if hint != int64(len(data)) {
		t.Errorf("real trace: hint %d, want its %d bytes", hint, len(data))
	}
	_, want := readWithHint(t, data, 0)
	if got != want {
		t.Error("real gzip trace: read with its hint, the trace differs from the plain JSON's")
	}

	hint, got, err = read("crafted.json.gz", crafted)
	if max := int64(len(crafted)) * maxGzipRatio; hint != max {
		t.Errorf("ISIZE %d in %d bytes: hint %d, want the cap %d", uint32(math.MaxUint32), len(crafted), hint, max)
	}
	if err != nil || got != want {
		t.Errorf("crafted ISIZE: the trace differs from the plain JSON's (%v)", err)
	}
}
