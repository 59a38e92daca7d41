package memtimeline

import (
	"fmt"
	"strconv"
	"time"
)

// FormatDuration prints a duration the one way torchmem does, in the
// largest unit under it with one decimal: "850.0 µs", "12.3 ms", "4.5 s",
// "2.5 min", "2.6 h", "3.0 days".
func FormatDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	var s string
	switch {
	case d >= 48*time.Hour:
		s = fmt.Sprintf("%.1f days", d.Hours()/24)
	case d >= time.Hour:
		s = fmt.Sprintf("%.1f h", d.Hours())
	case d >= time.Minute:
		s = fmt.Sprintf("%.1f min", d.Minutes())
	case d >= time.Second:
		s = fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Millisecond:
		s = fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		s = fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	}
	return sign + s
}

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
