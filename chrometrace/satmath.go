package chrometrace

import "math"

// AddSat returns a+b, held at math.MaxInt64 or math.MinInt64 instead of
// wrapping around. Byte counts come from the input: a hostile trace or
// snapshot can claim 2^63-1 bytes, and a wrapped sum would print as a
// negative size ("CUDA Mem -18 B") instead of an absurd one.
func AddSat(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// SubSat returns a-b, saturated like AddSat.
func SubSat(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b // a + 2^63 fits
	}
	return AddSat(a, -b)
}
