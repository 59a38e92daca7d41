//go:build !linux

package hugepages

// Advise is Linux's transparent huge pages advice; elsewhere nothing.
func Advise[T any](s []T) {}

// ReleaseTail is a no-op where Advise is.
func ReleaseTail[T any](s []T) {}

// PopulateAhead is a no-op where Advise is.
func PopulateAhead[T any](s []T, from, to int) {}
