package splice

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

var added = [][]byte{[]byte(`{"ph":"C","name":"a","args":{"v":1}}`), []byte(`{"ph":"i","name":"b"}`)}

func TestEvents(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"object", `{"schemaVersion":1,"traceEvents":[{"ph":"X"} ,{"ph":"X"}] ,"x":[1]}`,
			`{"schemaVersion":1,"traceEvents":[{"ph":"X"} ,{"ph":"X"},` + "A,B" + `] ,"x":[1]}`},
		{"empty array", `{"traceEvents":[ ]}`, `{"traceEvents":[ A,B]}`},
		{"bare array", "[{\"ph\":\"X\"}\n]\n", "[{\"ph\":\"X\"}\n,A,B]\n"},
		{"key in a string and nested", `{"a":{"traceEvents":[1]},"s":"\"traceEvents\":[","traceEvent":[2],"traceEvents":[{"n":"]"}]}`,
			`{"a":{"traceEvents":[1]},"s":"\"traceEvents\":[","traceEvent":[2],"traceEvents":[{"n":"]"},A,B]}`},
		{"escaped key is another key", `{"trace\u0045vents":[1],"traceEvents":[2]}`, `{"trace\u0045vents":[1],"traceEvents":[2,A,B]}`},
		{"events before other keys", `{"traceEvents":[[1,[2]],{"a":[]}],"deviceProperties":[{"id":0}]}`,
			`{"traceEvents":[[1,[2]],{"a":[]},A,B],"deviceProperties":[{"id":0}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte per read: the array's end may fall anywhere.
			var out bytes.Buffer
			st, err := Events(&out, iotest.OneByteReader(strings.NewReader(tc.in)), added)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.NewReplacer("A", string(added[0]), "B", string(added[1])).Replace(tc.want)
			if out.String() != want {
				t.Errorf("got  %s\nwant %s", out.String(), want)
			}
			if st.Added != 2 || !json.Valid(out.Bytes()) {
				t.Errorf("added %d, valid %v", st.Added, json.Valid(out.Bytes()))
			}
		})
	}
}

func TestEventsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"no events", `{"schemaVersion":1}`, ErrNoEvents},
		{"events not an array", `{"traceEvents":{"a":[1]}}`, ErrNoEvents},
		{"truncated", `{"traceEvents":[{"ph":"X"},{"ph"`, ErrTruncated},
		{"empty", ``, ErrTruncated},
		{"scalar", `12`, nil},
		{"unbalanced", `{"traceEvents":[}`, nil},
		{"two values", `{"a":1}{"traceEvents":[]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Events(&bytes.Buffer{}, strings.NewReader(tc.in), added)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// Whatever the input, a success writes the input with the events inserted
// at one place and nothing else changed, and valid JSON stays valid.
func FuzzEvents(f *testing.F) {
	for _, s := range []string{`{"traceEvents":[{"ph":"X"}]}`, `[]`, `{"a":"\\\"","traceEvents":[[]]}`, `{"traceEvents":[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		_, err := Events(&out, bytes.NewReader(in), added)
		if err != nil {
			return
		}
		o := out.Bytes()
		insert := len(o) - len(in)
		i := 0
		for i < len(in) && in[i] == o[i] {
			i++
		}
		if !bytes.Equal(in[i:], o[i+insert:]) {
			t.Fatalf("the input changed beyond the inserted events:\n%q\n%q", in, o)
		}
		if json.Valid(in) && !json.Valid(o) {
			t.Fatalf("valid JSON became invalid:\n%q\n%q", in, o)
		}
	})
}
