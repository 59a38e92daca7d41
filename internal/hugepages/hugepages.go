// Package hugepages is the one place the readers ask the kernel about
// pages: the trace reader's record lists and the snapshot decoder's slabs
// and entries are filled in order, millions of items at a time, and a
// page fault per 4 KiB was a fifth of their CPU in a virtual machine.
// Advice only: elsewhere than Linux, and where the kernel refuses, nothing
// changes but the faults.
package hugepages

const (
	hugePage  = 2 << 20 // a transparent huge page on amd64 and arm64
	smallPage = 4 << 10
)
