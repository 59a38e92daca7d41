package chrometrace

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Traces nobody here wrote (testdata/public, see SOURCES.md there), read
// against figures computed from the same files by plain Python
// (testdata/public/make_truth.py) or given by their own tests.

var publicData = filepath.Join("..", "testdata", "public")

type publicTruth struct {
	EventsByCategory   map[string]int64 `json:"events_by_category"`
	Steps              []int64          `json:"steps"`
	GPUMemoryEvents    int64            `json:"gpu_memory_events"`
	WithAddr           int64            `json:"with_addr"`
	WithTotalAllocated int64            `json:"with_total_allocated"`
	WithTotalReserved  int64            `json:"with_total_reserved"`
	RunningSumPeak     map[string]int64 `json:"running_sum_peak"`
	RunningSumEnd      map[string]int64 `json:"running_sum_end"`
	StringFields       []string         `json:"string_fields"`
	HIPCopyBytes       int64            `json:"hip_copy_bytes"`
}

func readJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func countCat(t *Trace, cat Category) (n int64) {
	for i := range t.HostOps {
		if t.HostOps[i].Cat == cat {
			n++
		}
	}
	for i := range t.DeviceOps {
		if t.DeviceOps[i].Cat == cat {
			n++
		}
	}
	return n
}

func hasWarning(t *Trace, part string) bool {
	return slices.ContainsFunc(t.Warnings, func(w string) bool { return strings.Contains(w, part) })
}

// torch 1.8/1.9 Kineto (the TensorBoard plugin's resnet50 sample): the old
// category names are read as today's, ProfilerStep#N is found among the
// Operators, and [memory] events with Bytes alone give the running-sum
// curve with each figure they cannot give named in a warning.
func TestTorch18KinetoTrace(t *testing.T) {
	dir := filepath.Join(publicData, "kineto_tb_plugin")
	tr := readTraceFile(t, filepath.Join(dir, "worker0.1623143089861.pt.trace.json.gz"))
	var want publicTruth
	readJSONFile(t, filepath.Join(dir, "worker0.1623143089861.truth.json"), &want)
	for _, c := range []struct {
		old string
		cat Category
	}{{"Operator", CatCPUOp}, {"Runtime", CatCUDARuntime}, {"Kernel", CatKernel}, {"Memcpy", CatGPUMemcpy}, {"Memset", CatGPUMemset}} {
		if got := countCat(tr, c.cat); got != want.EventsByCategory[c.old] {
			t.Errorf("%s: %d events read as %s, the file has %d", c.old, got, c.cat, want.EventsByCategory[c.old])
		}
	}
	var steps []int64
	for _, s := range tr.Steps {
		steps = append(steps, s.Number)
	}
	slices.Sort(steps)
	if !slices.Equal(steps, want.Steps) {
		t.Errorf("steps %v, want %v", steps, want.Steps)
	}
	var linked int
	for _, d := range tr.DeviceOps {
		if d.Cat == CatKernel && d.ExternalID != 0 {
			linked++
		}
	}
	if linked == 0 {
		t.Error("no kernel kept its 'external id' (torch 1.8's spelling)")
	}
	ms := tr.MemorySchema
	if ms.WithoutAddr != want.GPUMemoryEvents-want.WithAddr || !ms.DerivedAllocated || !ms.NoReserved || ms.Lifetimes() {
		t.Errorf("memory schema %+v, want %d events without Addr and no totals", ms, want.GPUMemoryEvents)
	}
	for _, w := range []string{"no Total Allocated", "no Total Reserved", "record no Addr"} {
		if !hasWarning(tr, w) {
			t.Errorf("no warning %q in %q", w, tr.Warnings)
		}
	}
	s := Summarize(tr, 0)
	if !s.WithStack {
		t.Error("with_stack off: the ops carry torch 1.8's \"Call stack\"")
	}
	if s.PeakAllocatedBytes != want.RunningSumPeak["0"] || !s.AllocatedFromWindowStart || !s.ReservedNotRecorded || s.PeakReservedBytes != 0 {
		t.Errorf("summary peak %d (from window start %v, reserved not recorded %v), want the running sum's %d",
			s.PeakAllocatedBytes, s.AllocatedFromWindowStart, s.ReservedNotRecorded, want.RunningSumPeak["0"])
	}
	var last MemoryEvent
	for _, e := range tr.Memory {
		if e.DeviceType.IsGPU() && e.TS >= last.TS {
			last = e
		}
	}
	if last.TotalAllocated != want.RunningSumEnd["0"] {
		t.Errorf("running sum ends at %d, want %d", last.TotalAllocated, want.RunningSumEnd["0"])
	}
	// The per-operator table: every Operator name has its row, as torch's
	// key_averages() made one per name.
	names := map[string]bool{}
	for i := range tr.HostOps {
		names[tr.Str(tr.HostOps[i].Name)] = true
	}
	rows := Operators(tr, OperatorOptions{Device: -1})
	hostRows := 0
	for _, r := range rows {
		if !r.OnDevice {
			hostRows++
		}
	}
	// ProfilerStep#5..#10 are one row, ProfilerStep*.
	if want := len(names) - len(want.Steps) + 1; hostRows != want {
		t.Errorf("%d host operator rows, want %d", hostRows, want)
	}
}

// The TensorBoard plugin's own memory-view test (tb_plugin/test/
// test_profiler.py, test_memory_view): its per-operator rows, under the
// torch 1.8 category names and today's alike. Its columns are self and
// inclusive "size increase" (torch's Self CUDA Mem and CUDA Mem), self
// allocation size and count, and calls; the plugin's inclusive allocation
// size and count have no column here.
func TestTBPluginMemoryView(t *testing.T) {
	dir := filepath.Join(publicData, "kineto_tb_plugin")
	var want struct {
		GPU map[string][7]int64 `json:"GPU0"`
		CPU map[string][7]int64 `json:"CPU"`
	}
	readJSONFile(t, filepath.Join(dir, "memory_view.expected.json"), &want)
	var tables []string
	for _, name := range []string{"memory_view.old_names.json.gz", "memory_view.new_names.json.gz"} {
		tr := readTraceFile(t, filepath.Join(dir, name))
		rows := map[string]OperatorStats{}
		for _, r := range Operators(tr, OperatorOptions{Device: -1}) {
			if !r.OnDevice {
				rows[r.Name] = r
			}
		}
		for op, w := range want.GPU {
			r := rows[op]
			if got := [...]int64{r.SelfDeviceMemory, r.AllocBytes, r.Allocs, r.DeviceMemory, r.Calls}; got != [...]int64{w[0], w[1], w[2], w[3], w[6]} {
				t.Errorf("%s GPU %s: self, alloc size, allocs, inclusive, calls = %v, want %v", name, op, got, w)
			}
		}
		for op, w := range want.CPU {
			r := rows[op]
			if r.SelfCPUMemory != w[0] || r.CPUMemory != w[3] || r.Calls != w[6] {
				t.Errorf("%s CPU %s: self %d, inclusive %d, calls %d, want %v", name, op, r.SelfCPUMemory, r.CPUMemory, r.Calls, w)
			}
		}
		var b strings.Builder
		for _, r := range Operators(tr, OperatorOptions{Device: -1}) {
			b.WriteString(r.Name + "\n")
		}
		tables = append(tables, b.String())
		if len(rows) < len(want.GPU) {
			t.Errorf("%s: %d host rows", name, len(rows))
		}
	}
	if tables[0] != tables[1] {
		t.Errorf("old and new category names give different tables:\n%s\n%s", tables[0], tables[1])
	}
}

// AMD ROCm (HTA's test data): HIP runtime events carry "stream": "0x0"
// and "size": "2560" as strings; no field is dropped with a warning, the
// kernels and copies are read with their streams.
func TestROCmTrace(t *testing.T) {
	dir := filepath.Join(publicData, "hta")
	tr := readTraceFile(t, filepath.Join(dir, "mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
	var want publicTruth
	readJSONFile(t, filepath.Join(dir, "mi250_minitoy_train_ROCm6_2_kineto.truth.json"), &want)
	if len(want.StringFields) == 0 {
		t.Fatal("the truth lists no string fields: not the trace this test is about")
	}
	if len(tr.Warnings) != 0 {
		t.Errorf("warnings %q", tr.Warnings)
	}
	if got := countCat(tr, CatKernel); got != want.EventsByCategory["kernel"] {
		t.Errorf("%d kernels, want %d", got, want.EventsByCategory["kernel"])
	}
	if got := countCat(tr, CatCUDARuntime); got != want.EventsByCategory["cuda_runtime"] {
		t.Errorf("%d HIP runtime events, want %d", got, want.EventsByCategory["cuda_runtime"])
	}
}

// A string stream is read when it holds a number (decimal or 0x hex), and
// left at 0 otherwise, as a number field sonic could not read would be.
func TestStreamAsString(t *testing.T) {
	tr, err := readString(t, `{"traceEvents":[
 {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":1,"dur":1,"args":{"stream":"0x1f","device":0}},
 {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":2,"dur":1,"args":{"stream":"12","device":0}},
 {"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":3,"dur":1,"args":{"stream":"default","device":0}},
 {"ph":"X","cat":"kernel","name":"k4","pid":0,"tid":7,"ts":4,"dur":1,"args":{"stream":7,"device":0}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	for _, d := range tr.DeviceOps {
		got = append(got, d.Stream)
	}
	if !slices.Equal(got, []int32{31, 12, 0, 7}) || len(tr.Warnings) != 0 {
		t.Errorf("streams %v, warnings %q", got, tr.Warnings)
	}
}

// MTIA (HTA's test data): mtia_runtime is read as a runtime; the device
// side (mtia_ccp_events) is not, and a warning says so with its count.
func TestMTIATrace(t *testing.T) {
	dir := filepath.Join(publicData, "hta")
	tr := readTraceFile(t, filepath.Join(dir, "mtia_inference_rank_0.json.gz"))
	var want publicTruth
	readJSONFile(t, filepath.Join(dir, "mtia_inference_rank_0.truth.json"), &want)
	if got := countCat(tr, CatCUDARuntime); got != want.EventsByCategory["mtia_runtime"] {
		t.Errorf("%d runtime events, want the %d mtia_runtime ones", got, want.EventsByCategory["mtia_runtime"])
	}
	if n := want.EventsByCategory["mtia_ccp_events"]; tr.Unread["mtia_ccp_events"] != n || !hasWarning(tr, "mtia_ccp_events") {
		t.Errorf("unread %v, warnings %q; want %d mtia_ccp_events named", tr.Unread, tr.Warnings, n)
	}
}

// torch 1.13 as Debian packages it (CPU only, built without Kineto):
// torch.profiler falls back to the legacy profiler, whose export is a bare
// array of uncategorised events with no [memory] events. Every operator
// row is read with torch's own call count (key_averages), and the missing
// memory is named in a warning rather than read as zeros.
func TestTorch113LegacyExport(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "testdata", "cpu_torch113", "*", "key_averages.json"))
	more, _ := filepath.Glob(filepath.Join("..", "testdata", "cpu_torch113", "*", "*", "key_averages.json"))
	dirs = append(dirs, more...)
	if len(dirs) < 3 {
		t.Fatalf("%d torch 1.13 recordings", len(dirs))
	}
	for _, oracle := range dirs {
		dir := filepath.Dir(oracle)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var want []oracleRow
			readJSONFile(t, oracle, &want)
			tr := readTraceFile(t, filepath.Join(dir, "trace.json.gz"))
			if !tr.Meta.Legacy || len(tr.Memory) != 0 || !hasWarning(tr, "legacy profiler export") {
				t.Errorf("legacy %v, %d memory events, warnings %q", tr.Meta.Legacy, len(tr.Memory), tr.Warnings)
			}
			got := map[string]int64{}
			for _, r := range Operators(tr, OperatorOptions{Device: -1}) {
				got[r.Name] += r.Calls
			}
			var memory int64
			for _, w := range want {
				if w.Key == "[memory]" {
					// The legacy profiler's row of memory records
					// outside any op: the export drops them.
					continue
				}
				if got[w.Key] != w.Count {
					t.Errorf("%s: %d calls, torch %d", w.Key, got[w.Key], w.Count)
				}
				delete(got, w.Key)
				if w.SelfCPU != nil {
					memory += *w.SelfCPU
				}
			}
			for k := range got {
				t.Errorf("row %q not in torch's output", k)
			}
			if memory == 0 {
				t.Error("torch's own rows hold no CPU memory: the recording did not profile memory")
			}
		})
	}
}

// ROCm's GPU copies carry no "bytes"; the HIP call that issued each one
// (same External id) says its "size" as a string: the copy gets it.
func TestROCmCopySizes(t *testing.T) {
	tr := readTraceFile(t, filepath.Join(publicData, "hta", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
	calls := map[int64]int64{}
	for i := range tr.HostOps {
		if tr.Str(tr.HostOps[i].Name) == "hipMemcpyWithStream" {
			calls[tr.HostOps[i].ExternalID] = 0
		}
	}
	var want publicTruth
	readJSONFile(t, filepath.Join(publicData, "hta", "mi250_minitoy_train_ROCm6_2_kineto.truth.json"), &want)
	copies, bytes := 0, int64(0)
	for _, d := range tr.DeviceOps {
		if d.Cat != CatGPUMemcpy {
			continue
		}
		copies++
		bytes += d.Bytes
		if _, ok := calls[d.ExternalID]; !ok || d.Bytes <= 0 {
			t.Errorf("copy %s (External id %d): %d bytes", tr.Str(d.Name), d.ExternalID, d.Bytes)
		}
	}
	if copies == 0 || len(calls) == 0 || bytes != want.HIPCopyBytes {
		t.Fatalf("%d copies of %d bytes, %d copy calls of %d bytes", copies, bytes, len(calls), want.HIPCopyBytes)
	}
}
