//go:build !linux

package chrometrace

import "unsafe"

// adviseHugePages is a no-op where the kernel takes no such advice.
func adviseHugePages(unsafe.Pointer, int) {}

// releaseTail is a no-op where adviseHugePages is.
func releaseTail(unsafe.Pointer, int, int) {}
