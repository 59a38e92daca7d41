package snapshot

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// snapshotDir holds the real snapshots (gzipped copies of
// /work/shared/traces/*/snapshot.pickle, torch 2.11, H200) and the oracle
// figures that CPython's own pickle module computed from them.
var snapshotDir = filepath.Join("..", "..", "testdata", "snapshots")

// readTestSnapshot returns the decompressed pickle bytes of a real snapshot.
func readTestSnapshot(tb testing.TB, name string) []byte {
	tb.Helper()
	f, err := os.Open(filepath.Join(snapshotDir, name+".pickle.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

func loadTestSnapshot(tb testing.TB, name string) *Snapshot {
	tb.Helper()
	s, err := Read(bytes.NewReader(readTestSnapshot(tb, name)))
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return s
}
