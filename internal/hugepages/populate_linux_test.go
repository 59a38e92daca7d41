package hugepages

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssPages is this process's resident pages (/proc/self/statm).
func rssPages(t *testing.T) int {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip(err)
	}
	f := strings.Fields(string(raw))
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPopulateFaultsIn: populate makes the pages of the range resident
// without writing a thing (the items a slice holds survive it), and
// leaves the pages outside the range alone.
func TestPopulateFaultsIn(t *testing.T) {
	const mb = 1 << 20
	s := make([]uint64, 0, 64*mb/8)
	for i := range 1000 {
		s = append(s, uint64(i)*2654435761)
	}
	before := rssPages(t)
	populate(s, 0, 32*mb/8)
	grew := (rssPages(t) - before) * os.Getpagesize()
	if grew < 30*mb || grew > 40*mb {
		t.Errorf("populating 32 MiB of 64 made %d MiB resident", grew/mb)
	}
	for i, v := range s {
		if v != uint64(i)*2654435761 {
			t.Fatalf("item %d = %d after populate", i, v)
		}
	}
	before = rssPages(t)
	populate(s, 60*mb/8, 1<<40) // clipped at cap: 4 MiB
	if grew := (rssPages(t) - before) * os.Getpagesize(); grew > 6*mb {
		t.Errorf("populating past the capacity made %d MiB resident", grew/mb)
	}
}
