package pickle

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// defaultLimit is the snapshot reader's default value limit
// (chrometrace.DefaultMaxValueBytes).
const defaultLimit = 64 << 20

// The decoder's test vectors (values_p*.pickle and CPython's JSON of the
// same values) sit with the snapshot reader's, in memtimeline/snapshot's
// testdata/pickle (gen_synthetic.py makes both).
func pickleVector(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "pickle", name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// toAny turns a decoded value into what encoding/json produces for the same
// data, so that it can be compared with CPython's json.dump of it.
func toAny(a *Arena, v Value) any {
	switch v.Kind() {
	case KindNone:
		return nil
	case KindTrue:
		return true
	case KindFalse:
		return false
	case KindInt, KindWideInt:
		n, _ := a.Int64(v)
		return json.Number(fmt.Sprint(n))
	case KindWideUint:
		return json.Number(fmt.Sprint(a.Wide[v.Index()]))
	case KindFloat:
		return a.Floats[v.Index()]
	case KindStr:
		return a.Strs.At(v.Index())
	case KindBytes:
		return "bytes:" + hex.EncodeToString([]byte(a.Strs.At(v.Index())))
	case KindList, KindTuple, KindSet:
		items := a.List(v)
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = toAny(a, it)
		}
		return out
	case KindDict:
		keys, vals := a.Dict(v)
		out := map[string]any{}
		for i, k := range keys {
			out[a.Strs.At(k.Index())] = toAny(a, vals[i])
		}
		return out
	}
	panic("unknown kind")
}

// sameJSON compares a decoded value with json.Decoder (UseNumber) output:
// integers exactly, floats as float64.
func sameJSON(got, want any, path string) error {
	switch w := want.(type) {
	case json.Number:
		switch g := got.(type) {
		case json.Number:
			gi, ok1 := new(big.Int).SetString(string(g), 10)
			wi, ok2 := new(big.Int).SetString(string(w), 10)
			if ok1 && ok2 && gi.Cmp(wi) == 0 {
				return nil
			}
		case float64:
			if wf, err := w.Float64(); err == nil && wf == g {
				return nil
			}
		}
		return fmt.Errorf("%s: got %v, want %v", path, got, want)
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %T of %d, want list of %d", path, got, lenOf(got), len(w))
		}
		for i := range w {
			if err := sameJSON(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %T of %d, want dict of %d", path, got, lenOf(got), len(w))
		}
		for k := range w {
			if err := sameJSON(g[k], w[k], path+"."+k); err != nil {
				return err
			}
		}
		return nil
	default:
		if got != want {
			return fmt.Errorf("%s: got %#v, want %#v", path, got, want)
		}
		return nil
	}
}

func lenOf(v any) int {
	switch x := v.(type) {
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	}
	return -1
}

// TestDecodeMatchesCPython decodes edge-case values pickled by CPython with
// protocols 2 to 5 and compares them with CPython's JSON of the same data.
func TestDecodeMatchesCPython(t *testing.T) {
	for proto := 2; proto <= 5; proto++ {
		t.Run(fmt.Sprintf("protocol%d", proto), func(t *testing.T) {
			raw := pickleVector(t, fmt.Sprintf("values_p%d.pickle", proto))
			if raw[1] != byte(proto) {
				t.Fatalf("file has protocol %d", raw[1])
			}
			a, root, err := Decode(bytes.NewReader(raw), defaultLimit)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(pickleVector(t, fmt.Sprintf("values_p%d.json", proto))))
			dec.UseNumber()
			var want any
			if err := dec.Decode(&want); err != nil {
				t.Fatal(err)
			}
			if err := sameJSON(toAny(a, root), want, "root"); err != nil {
				t.Error(err)
			}
			// The same bytes fed one at a time decode the same.
			a2, root2, err := Decode(iotest.OneByteReader(bytes.NewReader(raw)), defaultLimit)
			if err != nil {
				t.Fatal(err)
			}
			if err := sameJSON(toAny(a2, root2), want, "root"); err != nil {
				t.Errorf("one byte at a time: %v", err)
			}
		})
	}
}

// BenchmarkDecodePickle isolates the pickle machine from the mapping.
func BenchmarkDecodePickle(b *testing.B) {
	raw := memtest.ReadAll(b, memtest.NamedSnapshot("frag_small_allocs"))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Decode(bytes.NewReader(raw), defaultLimit); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPaged: items come back from every page, across page boundaries.
func TestPaged(t *testing.T) {
	var p paged[int]
	const n = 3*pageSize + 17
	for i := 0; i < n; i++ {
		p.Add(i)
	}
	p.Set(pageSize, -1)
	if p.Len() != n || p.At(0) != 0 || p.At(pageSize-1) != pageSize-1 || p.At(pageSize) != -1 || p.At(n-1) != n-1 || len(p.pages) != 4 {
		t.Fatalf("len %d, pages %d, at(pageSize) %d", p.Len(), len(p.pages), p.At(pageSize))
	}
}

// TestRealSnapshotsBuildWithinBudget: the density bound (BuiltBudget) must
// leave real allocator snapshots room: each builds at most half of
// BuiltPerByte per byte of pickle (measured 1.1 to 3.9).
func TestRealSnapshotsBuildWithinBudget(t *testing.T) {
	files, _ := filepath.Glob(memtest.Testdata("snapshots", "*.pickle.gz"))
	more, _ := filepath.Glob(memtest.Testdata("gpu", "*", "*.pickle.gz"))
	files = append(files, more...)
	if len(files) < 3 {
		t.Fatalf("want the snapshots of testdata, found %d", len(files))
	}
	for _, f := range files {
		raw := memtest.ReadAll(t, f)
		a, _, err := Decode(bytes.NewReader(raw), defaultLimit)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ratio := float64(a.Built) / float64(a.InputBytes)
		if ratio > BuiltPerByte/2 {
			t.Errorf("%s: built %.2f bytes per byte of pickle, want at most %d (half the budget)", f, ratio, BuiltPerByte/2)
		}
	}
}

// seqRecorder takes every dict with an "action" key as the next record.
type seqRecorder struct{ n uint32 }

func (r *seqRecorder) Record(a *Arena, keys, vals []Value) (uint32, bool, error) {
	for _, k := range keys {
		if s, _ := a.Str(k); s == "action" {
			r.n++
			return r.n - 1, true, nil
		}
	}
	return 0, false, nil
}

// TestRecordRuns: a list of consecutive records is kept as their run
// (RecordRun), and reads as their dicts when read as items, also after an
// item that is not a record joins it.
func TestRecordRuns(t *testing.T) {
	entry := "}(\x8c\x06action\x8c\x05allocu" // {"action": "alloc"}
	raw := "\x80\x04(" +
		"](" + entry + entry + "e" + // [rec0, rec1]
		"](" + entry + entry + "eK\x07a" + // [rec2, rec3, 7]
		"t."
	a, root, err := DecodeRecords(bytes.NewReader([]byte(raw)), defaultLimit, &seqRecorder{})
	if err != nil {
		t.Fatal(err)
	}
	lists := a.List(root)
	if first, n, ok := a.RecordRun(lists[0]); !ok || first != 0 || n != 2 {
		t.Errorf("first list: run %d+%d (%v), want 0+2", first, n, ok)
	}
	if _, _, ok := a.RecordRun(lists[1]); ok {
		t.Error("second list holds an int, yet reads as a run")
	}
	for i, want := range [][]any{{0, 1}, {2, 3, 7}} {
		items := a.List(lists[i])
		var got []any
		for _, it := range items {
			if id, ok := a.Record(it); ok {
				got = append(got, int(id))
			} else if n, ok := a.Int64(it); ok {
				got = append(got, int(n))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("list %d reads %v, want %v", i, got, want)
		}
	}
	if _, _, ok := a.RecordRun(lists[0]); ok {
		t.Error("a run read as items is still a run")
	}
}

// TestMemoWideValues: memo slots whose value does not fit 4 bytes (a
// negative int, an int over 28 bits: never memoized by CPython, but
// valid pickle) read back whole, through the fast loop and the plain
// path, and a slot set again, wide to narrow and back, reads the new value.
func TestMemoWideValues(t *testing.T) {
	var p []byte
	op := func(b ...byte) { p = append(p, b...) }
	op(0x80, 4, ']', '(')
	op('J', 0xfb, 0xff, 0xff, 0xff, 0x94)        // -5, memo 0 (wide)
	op('h', 0)                                   // -5 again
	op(0x8a, 6, 0, 0, 0, 0, 0, 1, 0x94)          // 2^40, memo 1 (wide)
	op(0x8a, 8, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x94) // 2^62 (a Wide handle), memo 2
	op('q', 0)                                   // memo 0 = 2^62: wide to narrow
	op('h', 0, 'h', 1)                           // 2^62, 2^40
	op(']', 'q', 1)                              // memo 1 = [] (narrow)
	op('h', 1)                                   // [] again
	op('J', 0xfe, 0xff, 0xff, 0xff, 'q', 0)      // -2, memo 0 = -2: narrow to wide
	op('h', 0, 'h', 2, 'e', '.')
	a, root, err := Decode(bytes.NewReader(p), defaultLimit)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(toAny(a, root))
	want := `[-5,-5,1099511627776,4611686018427387904,4611686018427387904,1099511627776,[],[],-2,-2,4611686018427387904]`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// One byte at a time: every opcode through the plain path.
	a, root, err = Decode(iotest.OneByteReader(bytes.NewReader(p)), defaultLimit)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(toAny(a, root)); string(got) != want {
		t.Errorf("one byte at a time: got %s", got)
	}
}

// TestRecordRunsAcrossOtherDicts: records whose dict handles do not count
// up by one (a dict made inside an entry, as a frame is the first time)
// still read as their own dicts when their run is read as items.
func TestRecordRunsAcrossOtherDicts(t *testing.T) {
	entry := "}(\x8c\x06action\x8c\x05allocu"            // {"action": "alloc"}
	nested := "}(\x8c\x06action\x8c\x05alloc\x8c\x01x}u" // {"action": "alloc", "x": {}}
	raw := "\x80\x04](" + entry + nested + entry + nested + nested + entry + "eK\x07a."
	a, root, err := DecodeRecords(bytes.NewReader([]byte(raw)), defaultLimit, &seqRecorder{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.recDict.runs) < 3 {
		t.Fatalf("%d runs of dict handles: the nested dicts did not break them", len(a.recDict.runs))
	}
	var got []any
	for _, it := range a.List(root) {
		if id, ok := a.Record(it); ok {
			got = append(got, int(id))
		} else if n, ok := a.Int64(it); ok {
			got = append(got, int(n))
		}
	}
	if want := []any{0, 1, 2, 3, 4, 5, 7}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reads %v, want %v", got, want)
	}
}
