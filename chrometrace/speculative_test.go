package chrometrace

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readBothWays reads data with the exact splitter only, then with
// speculative batches of chunk bytes, and returns both results rendered
// (canonical model, operator rows, or the error) and how many batches the
// fast path used.
func readBothWays(t testing.TB, data []byte, chunk int) (exact, fast string, fastBatches int) {
	t.Helper()
	exact, _ = readOneWay(t, data, false, chunk)
	fast, fastBatches = readOneWay(t, data, true, chunk)
	return exact, fast, fastBatches
}

// readOneWay reads data with the exact splitter alone (speculate false:
// chunk is not used, so one exact read serves every chunk size) or through
// speculative batches of chunk bytes, and renders the model and operators;
// it also says how many speculative batches were read.
func readOneWay(t testing.TB, data []byte, spec bool, chunk int) (string, int) {
	t.Helper()
	render := func(tr *Trace, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		var buf bytes.Buffer
		WriteCanonical(&buf, tr)
		for _, r := range Operators(tr, OperatorOptions{Device: -1, GroupBy: GroupByShape}) {
			fmt.Fprintf(&buf, "%+v\n", r)
		}
		return buf.String()
	}
	defer func(c, m int, s bool) { specChunkBytes, maxSpecChunkBytes, speculate = c, m, s }(specChunkBytes, maxSpecChunkBytes, speculate)

	speculate = spec
	var in io.Reader = bytes.NewReader(data)
	if spec {
		specChunkBytes, maxSpecChunkBytes = chunk, 64*chunk
		in = &chunkReader{in, 2 * chunk}
	}
	tr, err := Read(in, ReadOptions{Workers: 2})
	n := 0
	if tr != nil {
		n = tr.speculativeBatches
	}
	return render(tr, err), n
}

// chunkReader hands out at most n bytes a Read, as a gzip stream does (a
// few blocks' output): the speculative cutter reads about a batch at a
// time. From a bytes.Reader it reads whatever capacity its buffer grew to
// (64 times these tests' small batches, after one long event) and copies
// the unused rest ahead at every batch: that copy was half of these tests'
// CPU. The fast path still meets every real batch boundary and short reads.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// Every real trace reads the same through speculative batches of several
// sizes as through the exact splitter alone, and the fast path is used.
func TestSpeculativeAgreesOnRealTraces(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"traces/*/trace.json.gz", "gpu/*/trace.json.gz", "gpu/*/*/trace.json.gz", "gputimeline/*/trace.json.gz"} {
		m, _ := filepath.Glob(filepath.Join("..", "testdata", filepath.FromSlash(pattern)))
		paths = append(paths, m...)
	}
	if len(paths) == 0 {
		t.Fatal("no traces in testdata/traces")
	}
	for _, p := range paths {
		name := strings.TrimPrefix(filepath.ToSlash(filepath.Dir(p)), "../testdata/")
		if name == "traces/big_transformer" && testing.Short() {
			continue
		}
		data := gunzipShared(t, p)
		chunks := []int{300, 4096, 256 << 10}
		if len(data) > 20<<20 {
			chunks = []int{64 << 10, 1 << 20}
		}
		exact, _ := readOneWay(t, data, false, 0)
		for _, chunk := range chunks {
			fast, n := readOneWay(t, data, true, chunk)
			if exact != fast {
				t.Errorf("%s, %d-byte batches: speculative read (got) differs from exact (want):\n%s", name, chunk, firstDiff(fast, exact))
			}
			if n == 0 {
				t.Errorf("%s, %d-byte batches: the fast path was not used", name, chunk)
			}
		}
	}
}

// Damaged traces (bytes changed, cut, or elements that are not events)
// give the same model or the same error either way: the fast path must
// hand every doubtful batch to the exact splitter.
func TestSpeculativeAgreesOnDamage(t *testing.T) {
	full := gunzipFile(t, filepath.Join("..", "testdata", "traces", "leak_module_cache", "trace.json.gz"))
	head := full[:min(len(full), 200<<10)]
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := []string{`"`, `{`, `}`, `[`, `]`, `,`, `:`, `\`, ` `, `0`, `null`, `},{`, `}, {`, `"ph": 1`, `"x"`}
	used := 0
	for i := 0; i < 150; i++ {
		data := append([]byte(nil), head...)
		for k := 0; k < 1+rng.IntN(3); k++ {
			at := rng.IntN(len(data))
			switch rng.IntN(3) {
			case 0: // replace a byte run with a token
				tok := tokens[rng.IntN(len(tokens))]
				end := min(len(data), at+rng.IntN(4))
				data = append(data[:at], append([]byte(tok), data[end:]...)...)
			case 1: // cut
				data = data[:at]
			case 2: // delete a run
				end := min(len(data), at+1+rng.IntN(40))
				data = append(data[:at], data[end:]...)
			}
		}
		exact, fast, n := readBothWays(t, data, 700)
		if n > 0 {
			used++
		}
		if exact != fast {
			t.Fatalf("mutation %d: speculative read (got) differs from exact (want):\n%s", i, firstDiff(fast, exact))
		}
	}
	if used == 0 {
		t.Error("the fast path never ran")
	}

	// Elements the exact path rejects or warns about, placed after enough
	// good events that they land in a speculative batch.
	events := full[bytes.Index(full, []byte(`"traceEvents": [`))+len(`"traceEvents": [`):]
	events = events[:bytes.LastIndex(events[:100<<10], []byte("},"))+2]
	for _, odd := range []string{`null,`, `1,`, `"x",`, `[],`, `{},`, `{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":"bad","dur":5},`,
		`{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":5,"args":{"External id":"x"}},`,
		`{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":5,"args":{"Input Dims":[1,2}}},`,
		// Larger than the biggest speculative batch: the exact splitter
		// reads from here to the end.
		`{"ph":"X","cat":"cpu_op","name":"` + strings.Repeat("x", 100<<10) + `","pid":1,"tid":1,"ts":1,"dur":5},`} {
		data := []byte(`{"traceEvents":[` + string(events) + odd + string(events) + `{}]}`)
		exact, fast, n := readBothWays(t, data, 1000)
		if exact != fast {
			t.Errorf("%.80s: speculative read (got) differs from exact (want):\n%s", odd, firstDiff(fast, exact))
		}
		// (An error returns no trace to count batches on.)
		if n == 0 && !strings.HasPrefix(exact, "error: ") {
			t.Errorf("%.80s: the fast path was not used", odd)
		}
	}
}

// A gzip file cut short ends the fast path with a read error; the exact
// splitter must see the same bytes and the same error.
func TestSpeculativeAgreesOnTruncatedGzip(t *testing.T) {
	gz := readFile(t, filepath.Join("..", "testdata", "traces", "resnet_train_clean", "trace.json.gz"))
	defer func(c, m int, s bool) { specChunkBytes, maxSpecChunkBytes, speculate = c, m, s }(specChunkBytes, maxSpecChunkBytes, speculate)
	for _, cut := range []int{len(gz) / 3, len(gz) - 100} {
		var outs []string
		batches := 0
		for _, spec := range []bool{false, true} {
			speculate, specChunkBytes, maxSpecChunkBytes = spec, 4096, 1<<20
			in, err := NewInput(bytes.NewReader(gz[:cut]))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := Read(in, ReadOptions{Workers: 2})
			if err != nil {
				t.Fatalf("cut at %d: %v", cut, err)
			}
			if tr.Truncated == nil {
				t.Fatalf("cut at %d: not reported as truncated", cut)
			}
			var buf bytes.Buffer
			WriteCanonical(&buf, tr)
			outs = append(outs, buf.String())
			batches = tr.speculativeBatches
		}
		if outs[0] != outs[1] {
			t.Errorf("cut at %d: speculative read (got) differs from exact (want):\n%s", cut, firstDiff(outs[1], outs[0]))
		}
		if batches == 0 {
			t.Errorf("cut at %d: the fast path was not used", cut)
		}
	}
}

// Top-level fields after traceEvents can hold "}, {" too; a batch cut
// there ends past the array and must not be trusted.
func TestSpeculativeStopsAtArrayEnd(t *testing.T) {
	full := gunzipFile(t, filepath.Join("..", "testdata", "traces", "leak_module_cache", "trace.json.gz"))
	events := full[bytes.Index(full, []byte(`"traceEvents": [`))+len(`"traceEvents": [`):]
	events = events[:bytes.LastIndex(events[:20<<10], []byte("},"))+1]
	data := []byte(`{"traceEvents":[` + string(events) + `], "deviceProperties": [{"id": 0, "name": "A", "totalGlobalMem": 1}, {"id": 1, "name": "B", "totalGlobalMem": 2}], "schemaVersion": 1}`)
	for chunk := 40; chunk < 400; chunk += 7 {
		exact, fast, n := readBothWays(t, data, chunk)
		if exact != fast {
			t.Fatalf("%d-byte batches: speculative read (got) differs from exact (want):\n%s", chunk, firstDiff(fast, exact))
		}
		if n == 0 {
			t.Errorf("%d-byte batches: the fast path was not used", chunk)
		}
		if !strings.Contains(exact, `device 1 "B"`) {
			t.Fatalf("deviceProperties not read:\n%s", exact)
		}
	}
}

// Batches are converted on the workers with their own string and thread
// ids and renumbered in order; with batches of a few events, in both
// paths, the model must still match the goldens written by reading event
// by event.
func TestCanonicalGoldensSmallBatches(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*", "trace.string"))
	if len(paths) == 0 {
		t.Fatal("no goldens in testdata/traces")
	}
	defer func(c, m, e int, s bool) {
		specChunkBytes, maxSpecChunkBytes, batchBytes, speculate = c, m, e, s
	}(specChunkBytes, maxSpecChunkBytes, batchBytes, speculate)
	for _, golden := range paths {
		dir := filepath.Dir(golden)
		if filepath.Base(dir) == "big_transformer" && testing.Short() {
			continue
		}
		want := readFile(t, golden)
		data := gunzipShared(t, filepath.Join(dir, "trace.json.gz"))
		// One batch for the whole array converts event by event: its
		// string and thread ids are the reference (goldens print names,
		// not ids).
		speculate, batchBytes = false, len(data)+1
		whole, err := Read(bytes.NewReader(data), ReadOptions{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range []bool{false, true} {
			size := 2000
			if len(data) > 10<<20 {
				size = 64 << 10 // hundreds of batches still, in less time
			}
			speculate, specChunkBytes, maxSpecChunkBytes, batchBytes = spec, size, 1<<20, size
			tr, err := Read(&chunkReader{bytes.NewReader(data), 2 * size}, ReadOptions{Workers: 3})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			WriteCanonical(&buf, tr)
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s, speculative %v, %d-byte batches: model differs from the golden\n%s", filepath.Base(dir), spec, size, firstDiff(buf.String(), string(want)))
			}
			if !slices.Equal(tr.Strings, whole.Strings) || !slices.Equal(tr.Threads, whole.Threads) ||
				!slices.Equal(tr.HostOps, whole.HostOps) || !slices.Equal(tr.PyFrames, whole.PyFrames) {
				t.Errorf("%s, speculative %v, %d-byte batches: string, thread or record ids differ from one batch", filepath.Base(dir), spec, size)
			}
		}
	}
}
