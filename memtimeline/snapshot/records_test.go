package snapshot

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot/internal/pickle"
)

// pk writes pickle opcodes for the record tests.
type pk struct{ bytes.Buffer }

func (p *pk) op(b ...byte) *pk { p.Write(b); return p }
func (p *pk) str(s string) *pk {
	p.WriteByte('X')
	binary.Write(&p.Buffer, binary.LittleEndian, uint32(len(s)))
	p.WriteString(s)
	return p
}
func (p *pk) int(n byte) *pk { return p.op('K', n) }

// frameDict pushes {"filename": file, "line": line, "name": name}.
func (p *pk) frameDict(file string, line byte, name string) *pk {
	return p.op('}', '(').str("filename").str(file).str("line").int(line).str("name").str(name).op('u')
}

// tracePickle is {"segments": [], "device_traces": [[a, b]]}: a written
// key by key (SETITEM, as a writer other than CPython may), b in one
// SETITEMS with a frames list memoized in slot 0; then tail runs with the
// trace list on top of the stack.
func tracePickle(tail func(p *pk)) []byte {
	p := &pk{}
	p.op(0x80, 2, '}', '(').str("segments").op(']').str("device_traces").op(']', ']')
	p.op('}').str("action").str("alloc").op('s').str("addr").int(16).op('s').str("size").int(32).op('s').str("time_us").int(5).op('s', 'a')
	p.op('}', '(').str("action").str("free_completed").str("addr").int(16).str("size").int(32).str("time_us").int(6)
	p.str("frames").op(']', 'q', 0, '(')
	p.frameDict("f.py", 3, "fn")
	p.op('e', 'u', 'a')
	if tail != nil {
		tail(p)
	}
	p.op('a', 'u', '.')
	return p.Bytes()
}

// TestRecordsAndDictsAgree: an entry the decoder packs as a record (one
// SETITEMS) and one it keeps as a dict (SETITEM per key) read the same,
// side by side in one trace.
func TestRecordsAndDictsAgree(t *testing.T) {
	s, err := Read(bytes.NewReader(tracePickle(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.DeviceTraces) != 1 || s.DeviceTraces[0].Len() != 2 {
		t.Fatalf("traces %+v", s.DeviceTraces)
	}
	a, b := s.DeviceTraces[0].At(0), s.DeviceTraces[0].At(1)
	if a.Action != ActionAlloc || a.Addr != 16 || a.Size != 32 || a.TimeUS != 5 || a.Frames != nil || a.Context != nil {
		t.Errorf("entry written key by key: %+v", a)
	}
	want := Frame{Filename: "f.py", Line: 3, Name: "fn"}
	if b.Action != ActionFreeCompleted || b.Addr != 16 || b.Size != 32 || b.TimeUS != 6 || len(b.Frames) != 1 || b.Frames[0] != want {
		t.Errorf("entry in one SETITEMS: %+v", b)
	}
}

// TestRecordsAreFrozen: a frames list changed after its entry became a
// record would make the record disagree with the pickle; it is refused.
func TestRecordsAreFrozen(t *testing.T) {
	raw := tracePickle(func(p *pk) {
		p.op('h', 0) // the second entry's frames list, from the memo
		p.frameDict("g.py", 4, "late")
		p.op('a', '0') // appended to it, then dropped from the stack
	})
	_, err := Read(bytes.NewReader(raw))
	if err == nil || !strings.Contains(err.Error(), "changed after a trace entry took it") {
		t.Fatalf("got %v, want the changed-container error", err)
	}
}

// TestRealSnapshotsBecomeRecords: every trace entry of a real snapshot is
// packed while decoding, none kept as a dict.
func TestRealSnapshotsBecomeRecords(t *testing.T) {
	raw := memtest.ReadAll(t, memtest.NamedSnapshot("frag_small_allocs"))
	m := newMapper()
	a, root, err := pickle.DecodeRecords(bytes.NewReader(raw), chrometrace.DefaultMaxValueBytes, m)
	if err != nil {
		t.Fatal(err)
	}
	m.a = a
	dv, _ := a.DictGet(root, "device_traces")
	entries := 0
	for _, tr := range a.List(dv) {
		sp, err := m.recordSpan(tr)
		if err != nil {
			t.Fatal(err)
		}
		n := len(a.List(tr))
		if n > 0 && sp.n != n {
			t.Errorf("a trace of %d entries is not a run of records (%+v)", n, sp)
		}
		entries += n
	}
	if entries == 0 || m.h.n != entries {
		t.Errorf("%d records for %d entries", m.h.n, entries)
	}
}
