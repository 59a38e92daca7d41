package memtimeline

import (
	"fmt"
	"strconv"
)

// FormatBytes prints a byte count the way torch's profiler table does:
// binary units labelled "KB", "MB", "GB" (so "2.55 GB" means 2.55 GiB),
// two decimals, plain "B" under 1 KiB.
func FormatBytes(n int64) string {
	const (
		kb = 1 << 10
		mb = 1 << 20
		gb = 1 << 30
	)
	a := n
	if a < 0 {
		a = -a
	}
	switch {
	case a >= gb:
		return fmt.Sprintf("%.2f GB", float64(n)/gb)
	case a >= mb:
		return fmt.Sprintf("%.2f MB", float64(n)/mb)
	case a >= kb:
		return fmt.Sprintf("%.2f KB", float64(n)/kb)
	default:
		return strconv.FormatInt(n, 10) + " B"
	}
}
