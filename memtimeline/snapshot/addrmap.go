package snapshot

import (
	"fmt"
	"math/rand/v2"
)

// AddrMap maps block addresses to ints that fit 32 bits (indices of
// trace entries): the blocks live during a replay
// of a history, looked up, set and deleted once per entry. It is an
// open-addressing table with linear probing (deletion shifts the run
// back, so no tombstones); Go's map took a third of a replay of the 1 GB
// snapshot's 7.2M entries. A slot is 16 bytes and the table at most 3/4
// full, about what a Go map takes. The zero AddrMap is empty and ready.
//
// Addresses come from the file: with a fixed hash, a crafted snapshot
// could give every block the same home slot and make each replay
// quadratic. Like Go's map, each table hashes with its own random seed.
type AddrMap struct {
	slots []addrSlot
	n     int
	shift uint   // 64 - log2(len(slots))
	seed  uint64 // mixed into every address before hashing
}

type addrSlot struct {
	addr uint64
	v    int32
	used bool
}

func (m *AddrMap) home(addr uint64) int {
	return int(((addr ^ m.seed) * 0x9E3779B97F4A7C15) >> m.shift)
}

// Len is the number of addresses held.
func (m *AddrMap) Len() int { return m.n }

// find returns addr's slot, or the empty slot where it would go.
func (m *AddrMap) find(addr uint64) (int, bool) {
	mask := len(m.slots) - 1
	for i := m.home(addr); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if !s.used {
			return i, false
		}
		if s.addr == addr {
			return i, true
		}
	}
}

// Get returns addr's value.
func (m *AddrMap) Get(addr uint64) (int, bool) {
	if m.n == 0 {
		return 0, false
	}
	i, ok := m.find(addr)
	return int(m.slots[i].v), ok
}

// Set gives addr the value v (math.MinInt32 <= v <= math.MaxInt32).
func (m *AddrMap) Set(addr uint64, v int) {
	if int(int32(v)) != v {
		panic(fmt.Sprintf("snapshot.AddrMap: value %d does not fit 32 bits", v))
	}
	if 4*(m.n+1) > 3*len(m.slots) {
		m.grow()
	}
	i, ok := m.find(addr)
	if !ok {
		m.n++
	}
	m.slots[i] = addrSlot{addr: addr, v: int32(v), used: true}
}

// Delete removes addr and returns its value.
func (m *AddrMap) Delete(addr uint64) (int, bool) {
	if m.n == 0 {
		return 0, false
	}
	i, ok := m.find(addr)
	if !ok {
		return 0, false
	}
	v := int(m.slots[i].v)
	m.n--
	// Shift back the entries after i that would not be found past the
	// hole: those whose home is not cyclically in (i, j].
	mask := len(m.slots) - 1
	for j := (i + 1) & mask; m.slots[j].used; j = (j + 1) & mask {
		h := m.home(m.slots[j].addr)
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = addrSlot{}
	return v, true
}

// All calls fn for each address and its value, in no particular order.
func (m *AddrMap) All(fn func(addr uint64, v int)) {
	for _, s := range m.slots {
		if s.used {
			fn(s.addr, int(s.v))
		}
	}
}

func (m *AddrMap) grow() {
	old := m.slots
	if old == nil {
		m.seed = rand.Uint64()
	}
	size := max(64, 2*len(old))
	m.slots = make([]addrSlot, size)
	m.shift = 64
	for s := size; s > 1; s >>= 1 {
		m.shift--
	}
	m.n = 0
	for _, s := range old {
		if s.used {
			i, _ := m.find(s.addr)
			m.slots[i] = s
			m.n++
		}
	}
}
