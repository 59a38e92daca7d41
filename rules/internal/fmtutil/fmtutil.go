// Package fmtutil holds the small helpers that the rule engine and its
// analyses (rules/leak, rules/frag, rules/gpu, rules/diff) share, written
// once: ratios, plurals and non-nil slices for JSON.
package fmtutil

import (
	"strings"
)

// Ratio is a/b, 0 when b is 0.
func Ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Plural picks one or many for a count.
func Plural(n float64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// UpperFirst capitalizes a sentence's first letter.
func UpperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// NonNil is s, or an empty slice for nil (JSON [] rather than null).
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
