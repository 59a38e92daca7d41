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

// TestAddrMapCraftedAddresses: addresses a file could choose so that, with
// the multiplier alone, every one hashes to slot 0 of any table (the
// multiplier's inverse times 0, 1, 2...): with the table's seed they
// spread out, so no run of occupied slots grows with their number.
func TestAddrMapCraftedAddresses(t *testing.T) {
	const mul = 0x9E3779B97F4A7C15
	inv := uint64(mul) // Newton's iteration: mul * inv == 1 mod 2^64
	for range 6 {
		inv *= 2 - mul*inv
	}
	if mul*inv != 1 {
		t.Fatal("no inverse")
	}
	var m AddrMap
	const n = 4096
	for x := range uint64(n) {
		m.Set(x*inv, int(x))
	}
	longest, run := 0, 0
	for i := range 2 * len(m.slots) { // twice round: a run may wrap
		if m.slots[i%len(m.slots)].used {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	if longest > n/16 {
		t.Errorf("%d crafted addresses: a run of %d occupied slots (a table of %d)", n, longest, len(m.slots))
	}
	for x := range uint64(n) {
		if v, ok := m.Get(x * inv); !ok || v != int(x) {
			t.Fatalf("Get(%#x) = %d, %v", x*inv, v, ok)
		}
	}
}
