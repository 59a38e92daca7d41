package chrometrace

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
)

// TestGzipInflatesInPlaceForTraces: the trace reader takes the inflater
// itself (Unbuffered), so its batches are inflated in place on its own
// goroutine and the read-ahead goroutine never starts; a reader of the
// buffered Input gets the same bytes through the read-ahead, which has
// started once the stream is past inflateAheadAfter.
func TestGzipInflatesInPlaceForTraces(t *testing.T) {
	path := filepath.Join("..", "testdata", "traces", "leak_eval_no_grad", "trace.json.gz")
	want := gunzipFile(t, path)
	if len(want) < 2*inflateAheadAfter {
		t.Fatalf("%s: %d bytes decompressed, want a trace past the read-ahead's threshold", path, len(want))
	}

	in, err := NewInput(bytes.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tr, err := Read(in, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Events == 0 {
		t.Fatal("no events read")
	}
	if in.ahead.Started() {
		t.Error("reading a trace started the read-ahead goroutine; the batches should be inflated in place")
	}

	in, err = NewInput(bytes.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	got, err := io.ReadAll(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("buffered read: %d bytes, want the %d gunzip gives", len(got), len(want))
	}
	if !in.ahead.Started() {
		t.Error("a buffered read of the whole stream never started the read-ahead")
	}
}
