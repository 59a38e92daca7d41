package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot/internal/pickle"
)

var pickleDir = filepath.Join("testdata", "pickle")

func readPickleFile(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(pickleDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestSyntheticSnapshot reads a tiny snapshot with every field set, in each
// protocol, and checks the typed model and the analyses on it.
func TestSyntheticSnapshot(t *testing.T) {
	for proto := 2; proto <= 5; proto++ {
		t.Run(fmt.Sprintf("protocol%d", proto), func(t *testing.T) {
			s, err := Read(bytes.NewReader(readPickleFile(t, fmt.Sprintf("snapshot_p%d.pickle", proto))))
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Segments) != 1 || len(s.Segments[0].Blocks) != 2 {
				t.Fatalf("segments %+v", s.Segments)
			}
			seg := s.Segments[0]
			const base = uint64(1) << 46
			if seg.Address != base || seg.TotalSize != 2<<20 || seg.SegmentType != "small" || seg.PoolID != [2]int64{0, 0} {
				t.Errorf("segment %+v", seg)
			}
			b := seg.Blocks[1]
			if b.Address != base+1<<20 || b.State != BlockInactive || b.Frames != nil {
				t.Errorf("block %+v", b)
			}
			user := Frame{Filename: "/home/u/train.py", Line: 12, Name: "step"}
			if f := seg.Blocks[0].Frames; len(f) != 3 || f[2] != user {
				t.Errorf("block frames %+v", f)
			}
			tr := s.DeviceTraces[0]
			if len(tr) != 6 {
				t.Fatalf("%d trace entries", len(tr))
			}
			// Equal stacks share one slice (entries 0-2), as the decoder
			// merged equal frames lists.
			if &tr[0].Frames[0] != &tr[1].Frames[0] || &tr[1].Frames[0] != &tr[2].Frames[0] {
				t.Error("equal stacks are not shared")
			}
			oom := tr[5]
			if oom.Action != ActionOOM || oom.DeviceFree != 4096 || oom.Size != 1<<40 || oom.Addr != 0 {
				t.Errorf("oom entry %+v", oom)
			}
			set := s.AllocatorSettings
			if set.MaxSplitSize != 128<<20 || set.GarbageCollectionThreshold != 0.6 ||
				!strings.Contains(set.AllocConf, "max_split_size_mb:128") || set.RoundupPower2Divisions["1"] != 4 {
				t.Errorf("settings %+v", set)
			}
			rep := Analyze(s, 8)
			if rep.Stats.AllocatedBytes != 1<<20 || rep.Stats.InactiveSplitBytes != 1<<20 || rep.Stats.RequestedBytes != 1000000 {
				t.Errorf("stats %+v", rep.Stats)
			}
			if rep.SegmentFills[0].Bar != "####...." {
				t.Errorf("bar %q", rep.SegmentFills[0].Bar)
			}
			if len(rep.Leaks) != 1 || rep.Leaks[0].Site != user || rep.Leaks[0].Bytes != 1<<20 ||
				rep.Leaks[0].Steps != 1 || rep.Leaks[0].ActiveAtDumpBytes != 1<<20 {
				t.Errorf("leaks %+v", rep.Leaks)
			}
			if len(rep.OOMs) != 1 || rep.OOMs[0].Site != user {
				t.Errorf("ooms %+v", rep.OOMs)
			}
		})
	}
}

// TestRejectsWhatIsNotPlainData covers pickles that must fail with one
// clear error: classes, ints beyond 64 bits, wrong field types.
func TestRejectsWhatIsNotPlainData(t *testing.T) {
	cases := []struct {
		file  string
		want  string
		plain bool // errors.Is(err, ErrNotPlainData)
	}{
		{"global_p2.pickle", "unsupported pickle opcode GLOBAL (0x63)", true},
		{"global_p3.pickle", "unsupported pickle opcode GLOBAL (0x63)", true},
		{"global_p4.pickle", "unsupported pickle opcode STACK_GLOBAL (0x93)", true},
		{"global_p5.pickle", "unsupported pickle opcode STACK_GLOBAL (0x93)", true},
		{"overflow_pos.pickle", "integer of 9 bytes overflows 64 bits", false},
		{"overflow_neg.pickle", "integer of 9 bytes overflows 64 bits", false},
		{"negative_address.pickle", "segments[0].address: a int, want a non-negative int", false},
		{"wrong_type.pickle", "segments[0].total_size: a str, want an int", false},
		{"not_snapshot.pickle", "a dict without segments or device_traces (keys: hello)", false},
	}
	for _, c := range cases {
		_, err := Read(bytes.NewReader(readPickleFile(t, c.file)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.file, err, c.want)
			continue
		}
		if c.plain != errors.Is(err, pickle.ErrNotPlainData) {
			t.Errorf("%s: errors.Is(ErrNotPlainData) = %v", c.file, !c.plain)
		}
		if c.plain && !strings.Contains(err.Error(), "not a plain-data snapshot") {
			t.Errorf("%s: %v", c.file, err)
		}
	}
}

// TestTruncatedPickles cuts real and synthetic snapshots at every length:
// each prefix must give an error, never a panic or a partial snapshot.
func TestTruncatedPickles(t *testing.T) {
	inputs := map[string][]byte{
		"snapshot_p2": readPickleFile(t, "snapshot_p2.pickle"),
		"snapshot_p5": readPickleFile(t, "snapshot_p5.pickle"),
	}
	defer func(c int) { recChunk = c }(recChunk)
	recChunk = 4 * recMaxBytes // a few records a chunk: the same code, no 16 MB chunk a read
	for name, raw := range inputs {
		for n := 0; n < len(raw); n++ {
			if _, err := Read(bytes.NewReader(raw[:n])); err == nil {
				t.Fatalf("%s cut at %d of %d bytes: no error", name, n, len(raw))
			}
		}
	}
	// A real snapshot cut in the middle says so.
	raw := memtest.ReadAll(t, memtest.NamedSnapshot("leak_module_cache"))
	_, err := Read(bytes.NewReader(raw[:len(raw)/2]))
	if err == nil || !strings.Contains(err.Error(), "truncated pickle") {
		t.Errorf("half a snapshot: %v", err)
	}
}

// TestHostileInputs feeds hand-made opcode streams: absurd lengths must cost
// no more memory than the input holds, and malformed stacks must fail.
func TestHostileInputs(t *testing.T) {
	head := "\x80\x04"
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", "empty input"},
		{"not a pickle", "{\"traceEvents\": []}", "not a pickle of protocol 2 to 5"},
		{"protocol 1", "\x80\x01N.", "not a pickle"},
		{"protocol 6", "\x80\x06N.", "not a pickle"},
		{"BINUNICODE8 2^62", head + "\x8d\x00\x00\x00\x00\x00\x00\x00\x40abc", "a str of 4611686018427387904 bytes is over the limit of 64 MiB"},
		{"BINBYTES8 2^64-1", head + "\x8e\xff\xff\xff\xff\xff\xff\xff\xffabc", "over the limit"},
		{"BINUNICODE 4 GiB", head + "X\xff\xff\xff\xffabc", "over the limit"},
		{"BINUNICODE8 60 MiB, 3 bytes there", head + "\x8d\x00\x00\xc0\x03\x00\x00\x00\x00abc", "truncated"},
		{"LONG4 2 GiB", head + "\x8b\xff\xff\xff\x7f\x01", "overflows 64 bits"},
		{"LONG4 negative length", head + "\x8b\xff\xff\xff\xff", "negative length"},
		{"memo slot 2^32-1", head + "N\x94r\xff\xff\xff\xff0j\xff\xff\xff\xff.", ""},
		{"memo slot never set", head + "h\x05.", "memo slot 5 was never set"},
		{"APPENDS without MARK", head + "]K\x01e.", "without MARK"},
		{"SETITEMS odd", head + "}(K\x01u.", "odd number"},
		{"SETITEM on list", head + "]K\x01K\x02s.", "non-dict"},
		{"APPEND to dict", head + "}K\x01a.", "appending to a dict"},
		{"STOP with two values", head + "NN.", "STOP with 2 values"},
		{"STOP on empty stack", head + ".", "STOP with 0 values"},
		{"TUPLE3 short", head + "K\x01\x87.", "TUPLE3 with 1 values"},
		{"invalid opcode", head + "\xff", "invalid pickle opcode"},
		{"REDUCE", head + "R", "unsupported pickle opcode REDUCE"},
		{"BUILD", head + "b", "unsupported pickle opcode BUILD"},
		{"top-level int", head + "K\x01.", "a int, want a dict"},
		{"FRAME of 2^63", head + "\x95\xff\xff\xff\xff\xff\xff\xff\x7f}.", "a dict without segments"},
		{"segments not a list", head + "}\x8c\x08segments\x94K\x01s.", "segments: a int, want a list"},
		{"reader error", "", "boom"},
	}
	for _, c := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := iotest.DataErrReader(strings.NewReader(c.in))
		if c.name == "reader error" {
			r = iotest.ErrReader(errors.New("boom"))
		}
		_, err := Read(r)
		runtime.ReadMemStats(&after)
		switch {
		case c.want == "" && err != nil && !strings.Contains(err.Error(), "a None, want a dict"):
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
			t.Errorf("%s: allocated %d bytes for a %d-byte input", c.name, grew, len(c.in))
		}
	}
}

func TestIsPickle(t *testing.T) {
	for in, want := range map[string]bool{
		"\x80\x02": true, "\x80\x04\x95": true, "\x80\x05": true,
		"\x80\x01": false, "\x80\x06": false, "\x80": false, "": false, "\x1f\x8b": false, "{\"": false,
	} {
		if got := pickle.IsPickle([]byte(in)); got != want {
			t.Errorf("IsPickle(%q) = %v", in, got)
		}
	}
}

// TestRepetitionBomb builds a 1.5 MB pickle whose trace repeats one
// 100,000-key dict 100,000 times through the memo: expanding it would visit
// 10^10 fields. It must be refused quickly.
func TestRepetitionBomb(t *testing.T) {
	const keys, refs = 100_000, 100_000
	var b bytes.Buffer
	b.WriteString("\x80\x04}\x94\x8c\x0ddevice_traces\x94]\x94]\x94") // memo 0..3
	b.WriteString("}\x94(")                                           // entry dict: memo 4
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("k%d", i)
		b.WriteByte(0x8c)
		b.WriteByte(byte(len(k)))
		b.WriteString(k)
		b.WriteString("K\x01")
	}
	b.WriteString("u0(") // POP the entry dict off the stack
	for i := 0; i < refs; i++ {
		b.WriteString("h\x04")
	}
	b.WriteString("ea") // the trace gets the refs; device_traces gets the trace
	b.WriteString("s.") // top["device_traces"] = [...]
	start := time.Now()
	_, err := Read(bytes.NewReader(b.Bytes()))
	if !errors.Is(err, errTooRepetitive) {
		t.Fatalf("error %v, want errTooRepetitive", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to refuse", d)
	}
}
