package digest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules"
)

// Fuzz budget: what reading a digest and judging it may allocate, per
// byte of (decompressed) digest, past a fixed start.
const (
	fuzzAllocBase    = 8 << 20
	fuzzAllocPerByte = 64
)

// FuzzReadSummary feeds arbitrary bytes to the digest reader and every
// analysis that reads a digest back (the verdict, leaks, fragmentation,
// the checklist, diff's side): digests travel between machines in the
// map/reduce flow and are untrusted. It must return a digest or an error,
// never panic, and allocate at most fuzzAllocBase plus fuzzAllocPerByte
// bytes per input byte (a million empty charts in 3 KB of gzip took 1 GB).
// Seeds: the digests of real traces made here, and hand-made ones in
// testdata/fuzz/FuzzReadSummary.
func FuzzReadSummary(f *testing.F) {
	for _, name := range []string{"leak_module_cache", "big_transformer"} {
		tr := memtest.NamedTrace(f, name)
		in, err := rules.NewInput(name+".trace.json.gz", -1, rules.Data{Trace: tr})
		if err != nil {
			f.Fatal(err)
		}
		var b bytes.Buffer
		if err := json.NewEncoder(&b).Encode(Make(in, 1, "fuzz", nil)); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte(`{"format":"torchmem-summary","schema_version":1,"kind":"trace"}`))
	f.Add([]byte(`{"format":"torchmem-summary","schema_version":1,"kind":"steps","source":"s","rank":0,"oom_facts":{},"findings":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var err error
		used := memtest.Allocated(func() {
			var s *File
			s, err = Read(bytes.NewReader(data))
			if err != nil {
				return
			}
			in, ierr := s.Input()
			if ierr != nil {
				return
			}
			ev := rules.Evaluate([]*rules.Input{in, in}, rules.DefaultOptions())
			_ = ev.FragOf(in)
			_ = rules.NewInputSide(in)
			_ = in.Leaks()
			_ = in.Overview(-1)
		})
		if limit := fuzzAllocBase + fuzzAllocPerByte*uint64(len(data)); used > limit {
			t.Fatalf("allocated %d bytes for %d bytes of input (limit %d; err %v)", used, len(data), limit, err)
		}
	})
}
