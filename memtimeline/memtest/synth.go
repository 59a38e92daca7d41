package memtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

// Synth builds a Kineto trace; times are in microseconds.
type Synth struct{ Events []string }

// Step adds ProfilerStep#n.
func (s *Synth) Step(n int, ts, dur float64) {
	s.Events = append(s.Events, fmt.Sprintf(`{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,"ts":%g,"dur":%g}`, n, ts, dur))
}

// Host adds a host event (cpu_op, cuda_runtime, ...).
func (s *Synth) Host(cat, name string, ts, dur float64, ext int) {
	s.Events = append(s.Events, fmt.Sprintf(`{"ph":"X","cat":%q,"name":%q,"pid":1,"tid":1,"ts":%g,"dur":%g,"args":{"External id":%d}}`, cat, name, ts, dur, ext))
}

// Py adds a Python frame.
func (s *Synth) Py(name string, id, parent int, ts, dur float64) {
	s.Events = append(s.Events, fmt.Sprintf(`{"ph":"X","cat":"python_function","name":%q,"pid":1,"tid":1,"ts":%g,"dur":%g,"args":{"Python id":%d,"Python parent id":%d}}`, name, ts, dur, id, parent))
}

// Dev adds a device event (kernel, gpu_memcpy, ...).
func (s *Synth) Dev(cat, name string, device, stream int, ts, dur float64, bytes int64, ext int) {
	s.Events = append(s.Events, fmt.Sprintf(`{"ph":"X","cat":%q,"name":%q,"pid":%d,"tid":%d,"ts":%g,"dur":%g,"args":{"device":%d,"stream":%d,"bytes":%d,"External id":%d}}`,
		cat, name, device, stream, ts, dur, device, stream, bytes, ext))
}

// Kernel adds a kernel on a stream.
func (s *Synth) Kernel(device, stream int, ts, dur float64) {
	s.Dev("kernel", "gemm", device, stream, ts, dur, 0, 0)
}

// ItemCopy is loss.item(): aten::item > aten::_local_scalar_dense issuing a
// cudaMemcpyAsync and a cudaStreamSynchronize, and the 4-byte copy.
func (s *Synth) ItemCopy(ts float64, ext int) {
	s.Host("cpu_op", "aten::item", ts, 30, ext-1)
	s.Host("cpu_op", "aten::_local_scalar_dense", ts+1, 28, ext)
	s.Host("cuda_runtime", "cudaMemcpyAsync", ts+2, 5, ext)
	s.Host("cuda_runtime", "cudaStreamSynchronize", ts+8, 20, ext)
	s.Dev("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 0, 7, ts+25, 2, 4, ext)
}

// Trace reads the events as a Kineto trace.
func (s *Synth) Trace(t testing.TB) *chrometrace.Trace {
	t.Helper()
	doc := `{"schemaVersion":1,"traceEvents":[` + strings.Join(s.Events, ",\n") + `]}`
	tr, err := chrometrace.Read(strings.NewReader(doc), chrometrace.ReadOptions{})
	if err != nil {
		t.Fatalf("synthetic trace: %v\n%s", err, doc)
	}
	return tr
}
