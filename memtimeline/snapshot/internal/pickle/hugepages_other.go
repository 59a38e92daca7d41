//go:build !linux

package pickle

// AdviseHuge is Linux's transparent huge pages advice; elsewhere nothing.
func AdviseHuge[T any](s []T) {}
