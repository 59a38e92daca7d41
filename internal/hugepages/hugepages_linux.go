package hugepages

import (
	"syscall"
	"unsafe"
)

// Advise asks Linux to back the whole 2 MiB pages of s's capacity with
// transparent huge pages (THP enabled=madvise or always): a slice filled
// in order then takes a page fault per 2 MiB instead of per 4 KiB. Pages
// never written stay unbacked; a refusal (THP "never", no huge page free)
// is harmless: the pages stay small.
func Advise[T any](s []T) {
	madvise(s, 0, cap(s), hugePage, syscall.MADV_HUGEPAGE)
}

// ReleaseTail returns to the OS the whole small pages of s's capacity past
// len(s): the huge page a slice's items end in was faulted in whole, and
// the capacity past them is never written once the slice is clipped.
func ReleaseTail[T any](s []T) {
	madvise(s, len(s), cap(s), smallPage, syscall.MADV_DONTNEED)
}

// madvise gives advice for the whole pages of align bytes that lie in
// s's items [from, to).
func madvise[T any](s []T, from, to int, align uintptr, advice int) {
	if cap(s) == 0 {
		return
	}
	var zero T
	size := unsafe.Sizeof(zero)
	base := unsafe.Pointer(unsafe.SliceData(s[:cap(s)]))
	start, end := uintptr(base)+uintptr(from)*size, uintptr(base)+uintptr(to)*size
	lo, hi := (start+align-1)&^(align-1), end&^(align-1)
	if hi <= lo {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(base, lo-uintptr(base))), hi-lo)
	_ = syscall.Madvise(b, advice)
}

// PopulateAhead asks Linux, on a goroutine of its own, to fault in the
// whole small pages of s's items [from, to) now (MADV_POPULATE_WRITE, as a
// first write would, but on the other CPU): a slice filled in order, told
// a stretch ahead of where it is written, then finds its pages there and
// takes no page fault. Faulting in fresh memory is dear in a virtual
// machine (256 MiB measured 0.42 s of CPU in huge pages), and it is the
// filling goroutine's time otherwise. It writes nothing that Go sees (the
// pages read as the zeros they held), so it needs no synchronisation;
// where the kernel refuses (before Linux 5.14) nothing changes but the
// faults.
func PopulateAhead[T any](s []T, from, to int) {
	if max(from, 0) < min(to, cap(s)) {
		go populate(s, from, to)
	}
}

// populate is PopulateAhead's work, done now.
func populate[T any](s []T, from, to int) {
	if from, to = max(from, 0), min(to, cap(s)); from < to {
		madvise(s, from, to, smallPage, madvPopulateWrite)
	}
}

const madvPopulateWrite = 0x17 // MADV_POPULATE_WRITE, Linux 5.14
