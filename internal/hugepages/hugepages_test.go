package hugepages

import "testing"

// TestAdviceKeepsItems: advice never changes what a slice holds: the
// items up to len survive ReleaseTail (which drops the pages past them),
// for lengths on and off page boundaries.
func TestAdviceKeepsItems(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 1 << 20, 1<<20 + 7} {
		s := make([]uint64, 0, 3<<20)
		Advise(s)
		for i := range n {
			s = append(s, uint64(i)*2654435761)
		}
		ReleaseTail(s)
		for i, v := range s {
			if v != uint64(i)*2654435761 {
				t.Fatalf("len %d: item %d = %d after ReleaseTail", n, i, v)
			}
		}
		s = s[:cap(s)]
		for i := n; i < len(s); i += 4096 {
			if s[i] != 0 {
				t.Fatalf("len %d: item %d past the tail = %d, want 0", n, i, s[i])
			}
		}
	}
}
