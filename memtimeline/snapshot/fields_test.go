package snapshot

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// fieldsTruth is what round4_cases.py's snapshot_fields planted.
type fieldsTruth struct {
	MempoolBytes int64 `json:"mempool_bytes"`
	Sites        map[string]struct {
		File string `json:"file"`
		Line int    `json:"line"`
	} `json:"sites"`
}

// The newer snapshot fields as torch 2.11 writes them on the H200
// (testdata/gpu/round4/snapshot_fields): compile_context and user_metadata
// on each history entry, record_function ranges, a torch.cuda.MemPool and
// a CUDA graph's private pool (with frames whose line is (size_t)-1, which
// once failed the read); the same snapshot written as JSON reads into the
// same report; one taken with the history off says what it cannot tell.
func TestRealSnapshotFields(t *testing.T) {
	dir := memtest.Testdata("gpu", "round4", "snapshot_fields")
	var truth fieldsTruth
	memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
	s := memtest.Decode(t, filepath.Join(dir, "fields.snapshot.pickle"), Read)
	rep := Analyze(s, 0)

	var mempool *PoolUse
	for i, p := range rep.Pools {
		if p.Kind == "torch.cuda.MemPool" {
			mempool = &rep.Pools[i]
		}
	}
	site := truth.Sites["mempool"]
	if mempool == nil || mempool.AllocatedBytes != truth.MempoolBytes || len(mempool.Sites) == 0 ||
		!strings.HasPrefix(mempool.Sites[0], fmt.Sprintf("%s(%d)", site.File, site.Line)) {
		t.Errorf("pools %+v: want the MemPool holding %d bytes at %s:%d", rep.Pools, truth.MempoolBytes, site.File, site.Line)
	}
	graph := truth.Sites["graph"]
	if !slices.ContainsFunc(rep.Pools, func(p PoolUse) bool {
		return p.Kind == "CUDA graph capture" && len(p.Sites) > 0 && strings.Contains(p.Sites[0], graph.File+"(")
	}) {
		t.Errorf("pools %+v: want the graph capture's pool at %s", rep.Pools, graph.File)
	}
	has := func(field, prefix string) bool {
		return slices.ContainsFunc(rep.Labels, func(l LabelUse) bool { return l.Field == field && strings.HasPrefix(l.Value, prefix) && l.Allocs > 0 })
	}
	if !has("compile_context", "Torch-Compiled Region") || !has("user_metadata", "phase=train") || !has("user_metadata", "phase=pool") {
		t.Errorf("labels %+v: want the compiled region and the user's phases", rep.Labels)
	}
	if !slices.ContainsFunc(rep.Annotations, func(a AnnotationUse) bool { return a.Name == "train_step_N" && a.Ranges == 6 }) {
		t.Errorf("annotations %+v: want the record_function ranges", rep.Annotations)
	}
	if rep.NoHistory != "" {
		t.Errorf("history recorded, yet %q", rep.NoHistory)
	}

	js := memtest.Decode(t, filepath.Join(dir, "fields.snapshot.json.gz"), Read)
	a, _ := json.Marshal(rep)
	b, _ := json.Marshal(Analyze(js, 0))
	if string(a) != string(b) {
		t.Errorf("the JSON snapshot's report differs from the pickle's:\n%s\n%s", a, b)
	}

	nt := Analyze(memtest.Decode(t, filepath.Join(dir, "notraces.snapshot.pickle"), Read), 0)
	if !strings.Contains(nt.NoHistory, "cannot be told") || len(nt.TraceEntries) != 0 {
		t.Errorf("no history: %q with %d entries", nt.NoHistory, len(nt.TraceEntries))
	}
}

// A JSON snapshot's hostile or foreign shapes are refused with a reason.
func TestJSONSnapshotEdges(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"segments": 3}`, "JSON number"},
		{`{"segments": [{"blocks": [{"size": "x"}]}]}`, "JSON string"},
		{`{"segments": [`, "unexpected EOF"},
	} {
		_, err := ReadJSON(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
	if !LooksLikeJSON([]byte(" {\"segments\": []")) || LooksLikeJSON([]byte(`{"traceEvents": []}`)) {
		t.Error("LooksLikeJSON")
	}
	s, err := ReadJSON(strings.NewReader(`{"device_traces": [[{"action": "alloc", "addr": 1, "size": 8, "frames": [{"filename": "a.py", "line": 18446744073709551615, "name": "f"}]}]]}`))
	if err != nil || s.DeviceTraces[0].Len() != 1 || s.DeviceTraces[0].At(0).Frames[0].Line != 0 {
		t.Errorf("%+v %v: want one entry, its unknown line 0", s, err)
	}
}
