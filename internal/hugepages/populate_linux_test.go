package hugepages

import (
	"os"
	"strconv"
	"strings"
	"syscall"
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
// without writing a thing (what the memory holds survives it), and
// leaves the pages outside the range alone. The memory is mapped for the
// test: memory from Go's heap may be resident already.
func TestPopulateFaultsIn(t *testing.T) {
	const mb = 1 << 20
	s, err := syscall.Mmap(-1, 0, 64*mb, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip(err)
	}
	defer syscall.Munmap(s)
	for i := range 1000 {
		s[i] = byte(i * 7)
	}
	before := rssPages(t)
	populate(s, 0, 32*mb)
	grew := (rssPages(t) - before) * os.Getpagesize()
	if grew < 30*mb || grew > 40*mb {
		t.Errorf("populating 32 MiB of 64 made %d MiB resident", grew/mb)
	}
	for i := range 1000 {
		if s[i] != byte(i*7) {
			t.Fatalf("byte %d = %d after populate", i, s[i])
		}
	}
	before = rssPages(t)
	populate(s[:60*mb], 60*mb, 1<<40) // past len, clipped at cap (64 MiB): 4 MiB
	if grew := (rssPages(t) - before) * os.Getpagesize(); grew < 3*mb || grew > 6*mb {
		t.Errorf("populating up to the capacity made %d MiB resident, want 4", grew/mb)
	}
}
