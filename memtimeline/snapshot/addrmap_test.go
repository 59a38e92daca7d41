package snapshot

import (
	"math/rand/v2"
	"testing"
)

// TestAddrMapAgreesWithMap: random sets and deletes over a few hundred
// addresses (collisions, runs that wrap the table, growth) leave AddrMap
// holding what a Go map holds, after every step.
func TestAddrMapAgreesWithMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m AddrMap
	want := map[uint64]int{}
	addrs := make([]uint64, 300)
	for i := range addrs {
		addrs[i] = r.Uint64() &^ 511 // block addresses are 512-aligned
	}
	addrs[0], addrs[1] = 0, ^uint64(0)
	for step := range 200000 {
		a := addrs[r.IntN(len(addrs))]
		switch r.IntN(3) {
		case 0, 1:
			m.Set(a, step)
			want[a] = step
		default:
			v, ok := m.Delete(a)
			w, wok := want[a]
			if ok != wok || v != w {
				t.Fatalf("step %d: Delete(%#x) = %d, %v; want %d, %v", step, a, v, ok, w, wok)
			}
			delete(want, a)
		}
		if m.Len() != len(want) {
			t.Fatalf("step %d: %d addresses, want %d", step, m.Len(), len(want))
		}
		if step%97 == 0 {
			for _, a := range addrs {
				v, ok := m.Get(a)
				w, wok := want[a]
				if ok != wok || v != w {
					t.Fatalf("step %d: Get(%#x) = %d, %v; want %d, %v", step, a, v, ok, w, wok)
				}
			}
		}
	}
	n := 0
	m.All(func(a uint64, v int) {
		if want[a] != v {
			t.Errorf("All: %#x = %d, want %d", a, v, want[a])
		}
		n++
	})
	if n != len(want) {
		t.Errorf("All gave %d, want %d", n, len(want))
	}
}
