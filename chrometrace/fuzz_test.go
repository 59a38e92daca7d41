package chrometrace

import (
	"bytes"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary bytes (plain or gzip) through the reader and the
// operator aggregation: any input must give a model or an error, never a
// panic or a hang. Seeds: the hand-written edge cases and the head of a
// real trace; the corpus grown by `go test -fuzz` is kept in
// testdata/fuzz/FuzzRead. Plain JSON is also read with tiny speculative
// batches, which must give exactly what the exact splitter gives.
func FuzzRead(f *testing.F) {
	f.Add([]byte(edgeTrace))
	f.Add([]byte(`[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":5}]`))
	f.Add([]byte(`{"traceEvents":[{"ph":"i","name":"[memory]","pid":"p","tid":"t","ts":"1.5","args":{"Bytes":-512,"Device Type":1}}]}`))
	// Older and other schemas: torch 1.8 categories and Bytes-only memory
	// events, ROCm's string stream and size, the legacy bare array.
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"Operator","name":"ProfilerStep#5","pid":1,"tid":"1","ts":1,"dur":9},{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":2,"args":{"Device Type":1,"Device Id":0,"Bytes":512}},{"ph":"X","cat":"Kernel","name":"k","pid":0,"tid":"stream 7","ts":3,"dur":1,"args":{"external id":4,"stream":7}}]}`))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"hipMemcpyWithStream","pid":1,"tid":1,"ts":1,"dur":2,"args":{"External id":8,"stream":"0x0","size":"2560"}},{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":2,"tid":0,"ts":2,"dur":1,"args":{"External id":8,"stream":0}},{"ph":"X","cat":"mtia_ccp_events","name":"x","pid":2,"tid":0,"ts":3,"dur":1}]}`))
	f.Add([]byte(`[{"name":"aten::mm","ph":"X","ts":1,"dur":2,"tid":1,"pid":"CPU functions","args":{}}]`))
	real := gunzipFile(f, filepath.Join("..", "testdata", "traces", "leak_module_cache", "trace.json.gz"))
	f.Add(real[:4096])
	f.Fuzz(func(t *testing.T, data []byte) {
		if exact, fast, _ := readBothWays(t, data, 48); exact != fast {
			t.Fatalf("speculative read (got) differs from exact (want):\n%s", firstDiff(fast, exact))
		}
		in, err := NewInput(bytes.NewReader(data))
		if err != nil {
			return
		}
		tr, err := Read(in, ReadOptions{Workers: 2})
		if err != nil {
			return
		}
		if int64(len(tr.HostOps)+len(tr.Memory)+len(tr.PyFrames)+len(tr.DeviceOps)) > tr.Events {
			t.Fatalf("more records (%d) than events (%d)", len(tr.HostOps)+len(tr.Memory), tr.Events)
		}
		Operators(tr, OperatorOptions{Device: -1})
		Summarize(tr, -1)
		var buf bytes.Buffer
		WriteCanonical(&buf, tr)
	})
}
