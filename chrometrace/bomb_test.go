package chrometrace

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace/bombtest"
)

const bombEvent = `{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}`

// TestReadBombs: white space, one event or one top-level field of any size
// fails with a *LimitError naming what and where, and memory stays bounded
// by the limit, not by the input (10 GB generated as read), on both the
// speculative and the exact path.
func TestReadBombs(t *testing.T) {
	const limit = 1 << 20
	const tenGB = 10 << 30
	s := func(x string) []byte { return []byte(x) }
	cases := []struct {
		name string
		r    func() io.Reader
		what string // LimitError.What; "" for success
	}{
		{"spaces inside traceEvents", func() io.Reader {
			return &bombtest.Reader{Head: s(`{"traceEvents":[`), Fill: s(" "), N: tenGB, Tail: s(bombEvent + `]}`)}
		}, "a run of white space"},
		{"newlines between events", func() io.Reader {
			return &bombtest.Reader{Head: s(`{"traceEvents":[` + bombEvent + ","), Fill: s("\n\r\t "), N: tenGB, Tail: s(bombEvent + `]}`)}
		}, "a run of white space"},
		{"spaces before the trace", func() io.Reader { return &bombtest.Reader{Fill: s(" "), N: tenGB, Tail: s(`[` + bombEvent + `]`)} }, "a run of white space"},
		{"one endless name", func() io.Reader {
			return &bombtest.Reader{Head: s(`{"traceEvents":[` + bombEvent + `,{"ph":"X","name":"`), Fill: s("ab"), N: tenGB, Tail: s(`"}]}`)}
		}, "one JSON value"},
		{"one endless top-level field", func() io.Reader {
			return &bombtest.Reader{Head: s(`{"deviceProperties":[`), Fill: s("[1],"), N: tenGB, Tail: s(`1],"traceEvents":[]}`)}
		}, "one JSON value"},
		{"many large unknown fields", func() io.Reader {
			field := `"x":"` + strings.Repeat("y", limit/2) + `",`
			return &bombtest.Reader{Head: s(`{`), Fill: s(field), N: int64(len(field)) * 400, Tail: s(`"traceEvents":[` + bombEvent + `]}`)}
		}, ""},
		{"many events near the limit", func() io.Reader {
			ev := `{"ph":"X","cat":"cpu_op","name":"` + strings.Repeat("n", limit*9/10) + `","pid":1,"tid":1,"ts":1,"dur":1},`
			return &bombtest.Reader{Head: s(`{"traceEvents":[`), Fill: s(ev), N: int64(len(ev)) * 300, Tail: s(bombEvent + `]}`)}
		}, ""},
	}
	for _, spec := range []bool{true, false} {
		for _, c := range cases {
			t.Run(c.name+map[bool]string{true: "/speculative", false: "/exact"}[spec], func(t *testing.T) {
				defer func(old bool) { speculate = old }(speculate)
				speculate = spec
				var err error
				peak := bombtest.PeakHeap(func() { _, err = Read(c.r(), ReadOptions{MaxEventBytes: limit}) })
				var le *LimitError
				switch {
				case c.what == "" && err != nil:
					t.Fatalf("error %v", err)
				case c.what != "" && (!errors.As(err, &le) || le.What != c.what || le.Limit != limit):
					t.Fatalf("error %v, want a LimitError for %s", err, c.what)
				}
				t.Logf("%v; peak heap %d bytes", err, peak)
				if peak > 128<<20 {
					t.Errorf("peak heap %d bytes, want under 128 MiB", peak)
				}
			})
		}
	}
}

// TestReadGzipBomb is issue 16's bomb: `{"traceEvents":[` + 10 GB of spaces
// + one event, 10 MB of gzip, read at the default limit.
func TestReadGzipBomb(t *testing.T) {
	gz := bombtest.GzipBomb([]byte(`{"traceEvents":[`), ' ', 10<<30, []byte(bombEvent+`]}`))
	var err error
	peak := bombtest.PeakHeap(func() {
		in, e := NewInput(bytes.NewReader(gz))
		if e != nil {
			err = e
			return
		}
		defer in.Close()
		_, err = Read(in, ReadOptions{})
	})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != MaxEventBytes || le.Offset != int64(len(`{"traceEvents":[`)) {
		t.Fatalf("%d bytes of gzip: error %v, want a LimitError at byte 16", len(gz), err)
	}
	t.Logf("%d bytes of gzip: %v; peak heap %d bytes", len(gz), err, peak)
	if peak > 512<<20 {
		t.Errorf("peak heap %d bytes, want under 512 MiB", peak)
	}
}
