package chrometrace

import (
	"fmt"
	"math"
	"strconv"
)

// parseMicros converts a Chrome-trace timestamp, microseconds printed as
// decimal text ("5116167643092.396"), into integer nanoseconds. Going
// through float64 would lose the last digit at these magnitudes, so the
// integer and fraction parts are read separately.
func parseMicros(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("missing timestamp")
	}
	neg := false
	i := 0
	if s[0] == '-' {
		neg = true
		i = 1
	}
	var whole int64
	start := i
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if whole > (math.MaxInt64-9)/10 {
			return 0, fmt.Errorf("timestamp %q out of range", s)
		}
		whole = whole*10 + int64(s[i]-'0')
	}
	if i == start {
		return parseMicrosFloat(s)
	}
	var frac int64
	digits := 0
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if digits < 3 {
				frac = frac*10 + int64(s[i]-'0')
				digits++
			} else if digits == 3 {
				// Sub-nanosecond digits: round half up once.
				if s[i] >= '5' {
					frac++
				}
				digits++
			}
		}
	}
	if i != len(s) {
		// Exponent or other notation: rare, so take the float path.
		return parseMicrosFloat(s)
	}
	for d := min(digits, 3); d < 3; d++ {
		frac *= 10
	}
	if whole > (math.MaxInt64-frac)/1000 {
		return 0, fmt.Errorf("timestamp %q out of range", s)
	}
	ns := whole*1000 + frac
	if neg {
		ns = -ns
	}
	return ns, nil
}

func parseMicrosFloat(s string) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > math.MaxInt64/1000 {
		return 0, fmt.Errorf("bad timestamp %q", s)
	}
	return int64(math.Round(f * 1000)), nil
}
