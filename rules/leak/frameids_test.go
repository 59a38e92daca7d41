package leak

import (
	"math/rand/v2"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

// TestFrameIDs: the dense index answers as the map it replaces, for ids
// as torch numbers them, repeated on one thread, shared by two threads,
// or far apart.
func TestFrameIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		id   func(i int) int32
		th   func(i int) chrometrace.ThreadID
	}{
		{"dense", func(i int) int32 { return int32(i + 1) }, func(i int) chrometrace.ThreadID { return chrometrace.ThreadID(i % 3) }},
		{"repeated on a thread", func(i int) int32 { return int32(i%50 + 1) }, func(int) chrometrace.ThreadID { return 1 }},
		{"shared by threads", func(i int) int32 { return int32(i%50 + 1) }, func(i int) chrometrace.ThreadID { return chrometrace.ThreadID(i % 2) }},
		{"far apart", func(i int) int32 { return int32(i) * 1e6 }, func(int) chrometrace.ThreadID { return 0 }},
		{"negative", func(i int) int32 { return int32(i) - 5 }, func(int) chrometrace.ThreadID { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := make([]chrometrace.PyFrame, 200)
			want := map[[2]int64]int{}
			for i := range frames {
				frames[i] = chrometrace.PyFrame{ID: tc.id(i), Thread: tc.th(i)}
				want[[2]int64{int64(frames[i].Thread), int64(frames[i].ID)}] = i
			}
			x := newFrameIDs(frames)
			for range 2000 {
				th, id := chrometrace.ThreadID(r.IntN(4)), tc.id(r.IntN(260))+int32(r.IntN(3)-1)
				i, ok := x.get(th, id)
				wi, wok := want[[2]int64{int64(th), int64(id)}]
				if ok != wok || i != wi {
					t.Fatalf("get(%d, %d) = %d, %v; the map says %d, %v", th, id, i, ok, wi, wok)
				}
			}
		})
	}
}
