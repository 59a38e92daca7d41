package snapshot

import (
	"bytes"
	"testing"
)

// FuzzReadSnapshot feeds arbitrary bytes to the snapshot reader: it must
// return a snapshot or an error, never panic, hang or blow up memory, and
// the analyses must cope with whatever it returns. Seeds live in
// testdata/fuzz/FuzzReadSnapshot (synthetic snapshots of every protocol,
// hostile opcode streams).
func FuzzReadSnapshot(f *testing.F) {
	f.Add([]byte("\x80\x04}\x94(\x8c\x08segments\x94]\x94\x8c\x0edevice_traces\x94]\x94u."))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Read(bytes.NewReader(data))
		if err != nil {
			if s != nil {
				t.Fatal("snapshot and error both returned")
			}
			return
		}
		rep := Analyze(s, 16)
		_ = FormatSegmentMap(rep.SegmentFills, 5)
		if rep.Stats.Segments != len(s.Segments) {
			t.Fatalf("stats count %d segments of %d", rep.Stats.Segments, len(s.Segments))
		}
	})
}
