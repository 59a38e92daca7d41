//go:build !linux

package snapshot

// adviseHuge is Linux's transparent huge pages advice; elsewhere nothing.
func adviseHuge[T any](s []T) {}
