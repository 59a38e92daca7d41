package chrometrace

import (
	"bytes"
	"compress/gzip"
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

	in := testInput(t, readFile(t, path))
	if tr := readInput(t, in); tr.Events == 0 {
		t.Fatal("no events read")
	}
	if in.ahead.Started() {
		t.Error("reading a trace started the read-ahead goroutine; the batches should be inflated in place")
	}

	in = testInput(t, readFile(t, path))
	if got := readAllInput(t, in); !bytes.Equal(got, want) {
		t.Errorf("buffered read: %d bytes, want the %d gunzip gives", len(got), len(want))
	}
	if !in.ahead.Started() {
		t.Error("a buffered read of the whole stream never started the read-ahead")
	}
}

// TestGzipMembers: a gzip file of several members (concatenated files,
// pigz, a writer that flushes members) reads as their concatenation,
// through the trace reader's in-place path and through the buffer.
func TestGzipMembers(t *testing.T) {
	path := filepath.Join("..", "testdata", "traces", "leak_eval_no_grad", "trace.json.gz")
	want := gunzipFile(t, path)
	var multi bytes.Buffer
	for _, part := range [][]byte{want[:len(want)/3], want[len(want)/3 : len(want)*2/3], want[len(want)*2/3:]} {
		zw := gzip.NewWriter(&multi)
		zw.Write(part)
		zw.Close()
	}

	if got := readAllInput(t, testInput(t, multi.Bytes())); !bytes.Equal(got, want) {
		t.Fatalf("buffered read of 3 members: %d bytes, want the %d they hold", len(got), len(want))
	}

	single := readInput(t, testInput(t, want))
	fromMembers := readInput(t, testInput(t, multi.Bytes()))
	if fromMembers.Events != single.Events || len(fromMembers.HostOps) != len(single.HostOps) ||
		len(fromMembers.Memory) != len(single.Memory) || fromMembers.Truncated != single.Truncated {
		t.Errorf("trace read from 3 members: %d events, %d host ops, %d memory events (truncated %v); from the JSON: %d, %d, %d (%v)",
			fromMembers.Events, len(fromMembers.HostOps), len(fromMembers.Memory), fromMembers.Truncated,
			single.Events, len(single.HostOps), len(single.Memory), single.Truncated)
	}
}

// testInput is NewInput over data, closed when the test ends.
func testInput(t *testing.T, data []byte) *Input {
	t.Helper()
	in, err := NewInput(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

// readInput reads the trace in in.
func readInput(t *testing.T, in *Input) *Trace {
	t.Helper()
	tr, err := Read(in, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// readAllInput reads the rest of in through its buffer.
func readAllInput(t *testing.T, in *Input) []byte {
	t.Helper()
	b, err := io.ReadAll(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
