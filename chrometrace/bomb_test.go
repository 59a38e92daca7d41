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
				peak := bombtest.PeakHeap(func() { _, err = Read(c.r(), ReadOptions{Limits: Limits{ValueBytes: limit}}) })
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
	if !errors.As(err, &le) || le.Limit != DefaultMaxValueBytes || le.Offset != int64(len(`{"traceEvents":[`)) {
		t.Fatalf("%d bytes of gzip: error %v, want a LimitError at byte 16", len(gz), err)
	}
	t.Logf("%d bytes of gzip: %v; peak heap %d bytes", len(gz), err, peak)
	if peak > 512<<20 {
		t.Errorf("peak heap %d bytes, want under 512 MiB", peak)
	}
}

// TestReadSmallEventBombs: events of a few bytes, many of them. 1 GB of
// gzipped "{}" took 1.8 GB (a speculative chunk decoded 350,000 empty
// events at once, then again on the exact path), and 1 GB of tiny
// [memory] events 1.8 GB: the reader now decodes at most batchEvents per
// batch, gives an event without "ph" to the exact path at once, and stops
// at Limits.Events and Limits.MemoryEvents (set low here: the input is generated
// as read, the caps are what the test measures). It reads with the most
// workers any machine gets, the largest peak.
func TestReadSmallEventBombs(t *testing.T) {
	s := func(x string) []byte { return []byte(x) }
	memEv := `,{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":1,"args":{"Bytes":512,"Total Allocated":512,"Device Id":0,"Device Type":1,"Addr":1}}`
	cases := []struct {
		name string
		r    func() io.Reader
		what string // CountLimitError.What; "" for success
		heap uint64
		lim  Limits
	}{
		// As much input as the heap bound (a reader that kept it fails), and
		// many chunks of 1 MiB, each 350,000 events if decoded whole (sonic
		// on the speculative path, planted: 2.8 GB). 64 MB here once: more
		// CPU, nothing more caught; the peak is 2 to 9 MB.
		{"24 MB of empty events", func() io.Reader {
			return &bombtest.Reader{Head: s(`{"traceEvents":[{}`), Fill: s(`,{}`), N: 3 * (24 << 20 / 3), Tail: s(`]}`)}
		}, "", 24 << 20, Limits{}},
		{"empty events past the events cap", func() io.Reader {
			return &bombtest.Reader{Head: s(`{"traceEvents":[{}`), Fill: s(`,{}`), N: 3 << 30, Tail: s(`]}`)}
		}, "events in one trace", 48 << 20, Limits{Events: 1 << 22}},
		{"[memory] events past the memory events cap", func() io.Reader {
			return &bombtest.Reader{Head: s(`{"traceEvents":[` + bombEvent), Fill: s(memEv), N: int64(len(memEv)) << 30, Tail: s(`]}`)}
			// The peak follows the cap (1 << 19 here once: 34 MB, under 96)
			// and the workers, each holding a batch of records: 18, 29 and
			// 47 MB with 2, 4 and 8 on the exact path.
		}, "[memory] events in one trace", 56 << 20, Limits{MemoryEvents: 1 << 17}},
	}
	for _, spec := range []bool{true, false} {
		for _, c := range cases {
			t.Run(c.name+map[bool]string{true: "/speculative", false: "/exact"}[spec], func(t *testing.T) {
				defer func(old bool) { speculate = old }(speculate)
				speculate = spec
				var err error
				peak := bombtest.PeakHeap(func() { _, err = Read(c.r(), ReadOptions{Limits: c.lim, Workers: maxWorkers}) })
				var ce *CountLimitError
				switch {
				case c.what == "" && err != nil:
					t.Fatalf("error %v", err)
				case c.what != "" && (!errors.As(err, &ce) || ce.What != c.what):
					t.Fatalf("error %v, want a *CountLimitError on %s", err, c.what)
				}
				t.Logf("peak heap %d MB (%v)", peak>>20, err)
				if peak > c.heap {
					t.Errorf("peak heap %d MB, want under %d MB", peak>>20, c.heap>>20)
				}
			})
		}
	}
}
