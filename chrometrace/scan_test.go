package chrometrace

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameAsSonic checks fastDecode against sonic on data (a JSON array of
// events): whatever fastDecode accepts, sonic must accept too, with
// exactly the same events, both validating and not.
func sameAsSonic(t testing.TB, data []byte) (accepted bool) {
	t.Helper()
	fast, ok := fastDecodeEvents(data)
	if !ok {
		return false
	}
	for _, e := range fast {
		// The nanoseconds fastDecode reads on the way are parseMicros's.
		for _, f := range []struct {
			text json.Number
			ns   int64
			fast bool
		}{{e.Ts, e.tsNs, e.tsFast}, {e.Dur, e.durNs, e.durFast}} {
			if want, err := parseMicros(string(f.text)); f.fast && (err != nil || want != f.ns) {
				t.Fatalf("fastDecode read %q as %d ns, parseMicros as %d (%v)", f.text, f.ns, want, err)
			}
		}
	}
	for _, api := range []struct {
		name string
		dec  func(string, any) error
	}{{"validating", sonicValidating.UnmarshalFromString}, {"skipping", sonicAPI.UnmarshalFromString}} {
		want := make([]rawEvent, 0, len(fast)) // sized: growing it was a tenth of the CPU
		if err := api.dec(string(data), &want); err != nil {
			t.Fatalf("fastDecode accepted what sonic (%s) rejects: %v\n%q", api.name, err, data)
		}
		if len(want) == 0 && len(fast) == 0 {
			continue
		}
		if !rawEventsEqual(fast, want) {
			t.Fatalf("fastDecode and sonic (%s) differ on %q:\n got %+v\nwant %+v", api.name, data, fast, want)
		}
	}
	return true
}

// rawEventsEqual is reflect.DeepEqual(normRaw(a), normRaw(b)) written out
// (DeepEqual was a third of TestFastDecodeAgreesOnRealTraces' CPU):
// TestRawEventsEqual checks that it sees every field, so a field added to
// rawEvent or rawArgs fails there until it is compared here.
func rawEventsEqual(a, b []rawEvent) bool {
	if len(a) != len(b) {
		return false
	}
	// Raw text: nil and empty differ (as for DeepEqual), but for the
	// fields normRaw maps from empty to nil.
	raw := func(x, y rawJSON) bool { return (x == nil) == (y == nil) && bytes.Equal(x, y) }
	norm := bytes.Equal
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Ph != y.Ph || x.Cat != y.Cat || x.Name != y.Name || !norm(x.Pid, y.Pid) || !norm(x.Tid, y.Tid) ||
			x.Ts != y.Ts || x.Dur != y.Dur || !norm(x.ID, y.ID) {
			return false
		}
		p, q := &x.Args, &y.Args
		if p.Bytes != q.Bytes || !raw(p.Addr, q.Addr) || !raw(p.TotalAllocated, q.TotalAllocated) ||
			!raw(p.TotalReserved, q.TotalReserved) || p.DeviceType != q.DeviceType || p.DeviceID != q.DeviceID ||
			!raw(p.OptDeviceType, q.OptDeviceType) || !raw(p.OptDeviceID, q.OptDeviceID) ||
			p.ExternalID != q.ExternalID || p.ExternalIDOld != q.ExternalIDOld || p.SeqNr != q.SeqNr ||
			p.FwdThread != q.FwdThread || !norm(p.InputDims, q.InputDims) || p.CallStack != q.CallStack ||
			p.PythonID != q.PythonID || p.PythonParentID != q.PythonParentID || p.MemBytes != q.MemBytes ||
			!raw(p.CopySize, q.CopySize) || p.Device != q.Device || !raw(p.Stream, q.Stream) || p.MetaName != q.MetaName {
			return false
		}
	}
	return true
}

// TestRawEventsEqual: rawEventsEqual agrees with reflect.DeepEqual on
// normRaw'd events that differ in any one field (every field of rawEvent
// and rawArgs, found by reflection), in nil against empty text, or not at
// all.
func TestRawEventsEqual(t *testing.T) {
	// leaves lists the settable fields (not structs) of v, recursively.
	var leaves func(v reflect.Value, path string) []string
	leaves = func(v reflect.Value, path string) []string {
		var out []string
		for i := 0; i < v.NumField(); i++ {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			if !v.Type().Field(i).IsExported() {
				// fastDecode's by-products (tsNs, tsFast...): sonic does
				// not set them, normRaw clears them, sameAsSonic checks them.
				continue
			}
			if f.Kind() == reflect.Struct {
				out = append(out, leaves(f, name+".")...)
			} else {
				out = append(out, name)
			}
		}
		return out
	}
	set := func(ev *rawEvent, path string, variant int) {
		f := reflect.ValueOf(ev).Elem()
		for _, name := range strings.Split(path, ".") {
			f = f.FieldByName(name)
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString([]string{"1", "2", ""}[variant])
		case reflect.Int64:
			f.SetInt([]int64{1, 2, 0}[variant])
		case reflect.Slice:
			f.SetBytes([][]byte{[]byte("1"), []byte("2"), {}, nil}[variant])
		default:
			t.Fatalf("%s: a %v field: teach this test (and rawEventsEqual) about it", path, f.Kind())
		}
	}
	paths := leaves(reflect.ValueOf(rawEvent{}), "")
	if len(paths) < 25 {
		t.Fatalf("only %d fields found: %v", len(paths), paths)
	}
	base := func() rawEvent {
		var ev rawEvent
		for _, p := range paths {
			set(&ev, p, 0)
		}
		return ev
	}
	for _, p := range paths {
		variants := 3 // the third: the zero value
		typ := reflect.TypeOf(rawEvent{})
		for _, name := range strings.Split(p, ".") {
			f, _ := typ.FieldByName(name)
			typ = f.Type
		}
		if typ.Kind() == reflect.Slice {
			variants = 4 // empty, then nil
		}
		for v := 0; v < variants; v++ {
			for w := 0; w < variants; w++ {
				a, b := base(), base()
				set(&a, p, v)
				set(&b, p, w)
				want := reflect.DeepEqual(normRaw([]rawEvent{a}), normRaw([]rawEvent{b}))
				if got := rawEventsEqual([]rawEvent{a}, []rawEvent{b}); got != want {
					t.Errorf("%s: variants %d and %d: rawEventsEqual %v, reflect.DeepEqual %v", p, v, w, got, want)
				}
			}
		}
	}
	if rawEventsEqual(make([]rawEvent, 1), make([]rawEvent, 2)) {
		t.Error("different lengths compare equal")
	}
}

// normRaw maps empty raw values to nil: sonic leaves an absent field nil.
func normRaw(evs []rawEvent) []rawEvent {
	out := append([]rawEvent(nil), evs...)
	for i := range out {
		// sonic does not set them; sameAsSonic checks them.
		out[i].tsNs, out[i].durNs, out[i].tsFast, out[i].durFast = 0, 0, false, false
		for _, r := range []*rawJSON{&out[i].Pid, &out[i].Tid, &out[i].ID, &out[i].Args.InputDims} {
			if len(*r) == 0 {
				*r = nil
			}
		}
	}
	return out
}

// TestFastDecodeAgreesOnRealTraces decodes every real trace's events in
// batches both ways; fastDecode must accept all of them (it exists for
// these) and agree with sonic.
func TestFastDecodeAgreesOnRealTraces(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*", "trace.json.gz"))
	gpu, _ := filepath.Glob(filepath.Join("..", "testdata", "gpu", "*", "*trace*.json.gz"))
	paths = append(paths, gpu...)
	if len(paths) < 5 {
		t.Fatalf("only %d traces found", len(paths))
	}
	for _, p := range paths {
		data := gunzipShared(t, p)
		open := bytes.Index(data, []byte(`"traceEvents"`))
		start := open + bytes.IndexByte(data[open:], '[') + 1
		// Cut the array into speculative-style batches of ~64 KB.
		batches, rejected := 0, 0
		for rest := data[start:]; len(rest) > 0; {
			n := min(len(rest), 64<<10)
			cut, next, ok := lastElementBoundary(rest[:n])
			if !ok || n == len(rest) {
				break
			}
			batch := append(append([]byte{'['}, rest[:cut]...), ']')
			if !sameAsSonic(t, batch) {
				t.Logf("rejected %q", batch[max(0, len(batch)-400):])
				rejected++
			}
			batches++
			rest = rest[next:]
		}
		if batches == 0 || rejected > 0 {
			t.Errorf("%s: fastDecode rejected %d of %d batches", p, rejected, batches)
		}
	}
}

func TestFastDecodeCorners(t *testing.T) {
	cases := []struct {
		in     string
		accept bool
	}{
		{`[]`, true},
		{` [ ] `, true},
		{`[{}]`, true},
		{`[{"ph":"X","ph":"Y","args":{"Bytes":1},"args":{"Addr":2}}]`, true},
		{`[{"name":"a\"b\\c\/d\n\u00e9\u20ac"}]`, true},
		{"[{\"name\":\"caf\\u00e9 \xc3\xa9\"}]", true},
		{`[{"ts":-0.5e-3,"dur":0,"args":{"Bytes":-0,"Addr":9223372036854775808}}]`, true},
		{`[{"pid":"p","tid":[1,{"a":null}],"x":[true,false,null,{},[]]}]`, true},
		{`[{"args":{"Input Dims":[[1, 2], [[3]], []],"Call stack":"a.py(1): f;b.py(2): g"}}]`, true},
		{"[{\"name\":\"a\x01\"}]", false}, // control character: sonic's call
		{"[{\"name\":\"\xff\"}]", false},  // invalid UTF-8
		{`[{"name":"\ud800"}]`, false},    // surrogate
		{`[{"name":"\x"}]`, false},        // bad escape
		{`[{"ph":"X","ph":null,"ts":1,"ts":null,"pid":null,"args":{"Bytes":5,"Bytes":null,"Addr":null,"Python id":null,"Input Dims":null}}]`, true},
		{`[{"args":{"Bytes":5},"args":null}]`, true},
		{`[{"ts":"1.5"}]`, false},           // quoted number
		{`[{"args":{"Bytes":1.5}}]`, false}, // fraction for an int
		{`[{"args":{"Bytes":12345678901234567890}}]`, false},
		// Addr, the totals and stream are kept as text (absent must stay
		// absent; ROCm writes "stream":"0x0"): any value is accepted
		// and read where it holds an integer.
		{`[{"args":{"Addr":-1}}]`, true},
		{`[{"args":{"Addr":"0x10","stream":"0x0","Total Allocated":null}}]`, true},
		{`[{"x":01}]`, false},
		{`[{"x":[1,]}]`, false},
		{`[{"x":1,}]`, false},
		{`[{"x":tru}]`, false},
		{`[{"x":1}`, false},
		{`[{"x":1}]]`, false},
		{`[{"x":1},]`, false},
		{`[1]`, false},
		{`[null]`, false},
		{`[{"p\u0068":"X"}]`, false}, // escaped key: sonic's call
	}
	for _, c := range cases {
		if got := sameAsSonic(t, []byte(c.in)); got != c.accept {
			t.Errorf("%q: accepted %v, want %v", c.in, got, c.accept)
		}
	}
}

// TestFastDecodeLearnedGaps: the text between members, learned from one
// event and matched in the next ones (keyPred's gaps), gives what sonic
// gives whatever the later events change: white space, key order, a key
// that starts like a learned one, a value's type, the end of the batch.
func TestFastDecodeLearnedGaps(t *testing.T) {
	const ev = "{\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 1, \"tid\": 2,\n" +
		"    \"ts\": 10.5, \"dur\": 2.25,\n    \"args\": {\n      \"External id\": 7,\"Record function id\": 0, " +
		"\"Input Dims\": [[4, 4], [4, 4]], \"Ev Idx\": 3\n    }\n  }"
	kernel := "{\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7,\n" +
		"    \"ts\": 11, \"dur\": 1,\n    \"args\": {\n      \"External id\": 7,      \"queued\": 0, \"device\": 0, " +
		"\"context\": 1,      \"stream\": 7, \"est. achieved occupancy %\": 100\n    }\n  }"
	batch := func(evs ...string) string { return "[\n  " + strings.Join(evs, ",\n  ") + "\n]" }
	swap := func(old, new string) string { return strings.Replace(ev, old, new, 1) }
	cases := []struct {
		name, in string
		accept   bool
	}{
		{"the same layout", batch(ev, ev, ev, kernel, ev, kernel, kernel), true},
		{"more white space after a gap", batch(ev, swap(`"ph": "X"`, `"ph":  "X"`), swap(`"ts": `, `"ts":   `), swap(`"tid": 2,`+"\n    ", `"tid": 2,`+"\n\t  ")), true},
		{"more white space between events", strings.Replace(batch(ev, ev, ev, ev), ",\n  {", ",\n   {", 2), true},
		{"less white space between events", strings.Replace(batch(ev, ev, ev, ev), ",\n  {", ",{", 2), true},
		{"no event after a separator", batch(ev, ev, ev+",\n  [1]"), false},
		{"keys in another order", batch(ev, ev, swap(`"pid": 1, "tid": 2`, `"tid": 2, "pid": 1`), ev), true},
		{"a key longer than the learned one", batch(ev, ev, swap(`"dur": 2.25`, `"durx": 2.25`), ev), true},
		{"a member more, then one less", batch(ev, ev, swap(`"Ev Idx": 3`, `"Ev Idx": 3, "Bytes": 5`), swap(`, "Ev Idx": 3`, ``), ev), true},
		{"an empty args, then full", batch(ev, swap(`"args": {`, `"args": {}, "x": {`), ev), true},
		{"a string where a number was", batch(ev, ev, swap(`"dur": 2.25`, `"dur": "2.25"`)), false},
		{"a string where a raw value was", batch(ev, ev, swap(`"pid": 1`, `"pid": "1"`)), true},
		{"a broken value after a learned gap", batch(ev, ev, swap(`"dur": 2.25`, `"dur": ]`)), false},
		{"a missing comma", batch(ev, ev, swap(`"dur": 2.25,`, `"dur": 2.25`)), false},
		{"the batch ending inside a gap's reach", batch(ev, ev, `{"ph": "X", "cat": "cpu_op"}`), true},
	}
	for _, c := range cases {
		if got := sameAsSonic(t, []byte(c.in)); got != c.accept {
			t.Errorf("%s: accepted %v, want %v\n%s", c.name, got, c.accept, c.in)
		}
	}
}

// TestStrEnd checks the eight-bytes-at-a-time scan against the byte loop.
func TestStrEnd(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab \"\\\x00\x1f\x20\x7f\x80\xff~!")
	for n := 0; n < 20000; n++ {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte('a' + r.IntN(26))
			}
		}
		from := 0
		if len(b) > 0 {
			from = r.IntN(len(b))
		}
		want := from
		for want < len(b) && !strStop[b[want]] {
			want++
		}
		if got := strEnd(b, from); got != want {
			t.Fatalf("strEnd(%q, %d) = %d, want %d", b, from, got, want)
		}
	}
}

// FuzzFastDecode: on any input fastDecode accepts, sonic agrees exactly.
func FuzzFastDecode(f *testing.F) {
	f.Add([]byte(`[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":"2","ts":1.5,"dur":2,"args":{"External id":3,"Input Dims":[[1]]}}]`))
	f.Add([]byte(`[{"ph":"i","name":"[memory]","args":{"Bytes":-512,"Addr":1,"Total Allocated":5}},{"ph":"M","name":"thread_name","args":{"name":"x"}}]`))
	f.Add([]byte(`[{"ph":"s","id":7,"cat":"fwdbwd","x":[true,null,{"y":"\u00e9"}]}]`))
	// Events in Kineto's layout, for the gaps learned between members.
	for _, ev := range []string{
		"{\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 1, \"tid\": 2,\n    \"ts\": 10.5, \"dur\": 2.25,\n    \"args\": {\n      \"External id\": 7,\"Record function id\": 0, \"Ev Idx\": 3\n    }\n  }",
		"{\n    \"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\",\n    \"pid\": 1, \"tid\": 2,\n    \"ts\": 11,\n    \"args\": {\n      \"Total Reserved\": 4, \"Total Allocated\": 2, \"Bytes\": 2, \"Device Id\": 0, \"Device Type\": 1, \"Addr\": 9\n    }\n  }",
	} {
		f.Add([]byte("[\n  " + ev + ",\n  " + ev + ",\n  " + ev + "\n]"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsSonic(t, data)
	})
}
