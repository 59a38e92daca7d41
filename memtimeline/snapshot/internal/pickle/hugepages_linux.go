package pickle

import (
	"syscall"
	"unsafe"
)

// AdviseHuge asks Linux to back the items of s with transparent huge
// pages where the system allows it on request (enabled=madvise): filling
// millions of fresh trace entries otherwise takes a page fault per 4 KiB,
// which was a fifth of the CPU of reading a 600 MB snapshot (and the
// decoder's memo and records a tenth more). A refusal is harmless: the
// pages stay small.
func AdviseHuge[T any](s []T) {
	if len(s) == 0 {
		return
	}
	const huge = 2 << 20
	var zero T
	base := unsafe.Pointer(unsafe.SliceData(s))
	start := uintptr(base)
	end := start + uintptr(len(s))*unsafe.Sizeof(zero)
	lo, hi := (start+huge-1)&^(huge-1), end&^(huge-1)
	if hi <= lo {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(base, lo-start)), hi-lo)
	_ = syscall.Madvise(b, 14) // MADV_HUGEPAGE
}
