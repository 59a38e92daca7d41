package chrometrace

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"reflect"
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
	got := normRaw(fast)
	for _, api := range []struct {
		name string
		dec  func(string, any) error
	}{{"validating", sonicValidating.UnmarshalFromString}, {"skipping", sonicAPI.UnmarshalFromString}} {
		var want []rawEvent
		if err := api.dec(string(data), &want); err != nil {
			t.Fatalf("fastDecode accepted what sonic (%s) rejects: %v\n%q", api.name, err, data)
		}
		if len(want) == 0 && len(fast) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, normRaw(want)) {
			t.Fatalf("fastDecode and sonic (%s) differ on %q:\n got %+v\nwant %+v", api.name, data, fast, want)
		}
	}
	return true
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
		data := gunzipFile(t, p)
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
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsSonic(t, data)
	})
}
