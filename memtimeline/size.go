package memtimeline

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// sizeRe is a size as users write it: a number and an optional unit.
var sizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)$`)

// sizeUnits are binary whatever the spelling: torch prints GiB as "GB",
// so "1.5GB" is what a user copies from its table.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// ParseBytes reads a size wherever torchmem takes one (flags, rules
// thresholds, --fail-if): a bare integer is bytes; "512KiB", "2MiB",
// "1.5GB", "64M" use binary units (KB = KiB, as torch prints them).
// Negative, fractional bytes and sizes past 2^53 (exact in a float64, far
// beyond any GPU) are refused.
func ParseBytes(s string) (int64, error) {
	m := sizeRe.FindStringSubmatch(strings.TrimSpace(s))
	unit, ok := 0.0, false
	if m != nil {
		unit, ok = sizeUnits[strings.ToLower(m[2])]
	}
	if !ok {
		return 0, fmt.Errorf("bad size %q: want bytes (1048576) or a number with a unit (512KiB, 2MiB, 1.5GB; KB, MB, GB are binary, as torch prints them)", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	v *= unit
	if err != nil || math.IsInf(v, 0) || v > 1<<53 {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("bad size %q: not a whole number of bytes", s)
	}
	return int64(v), nil
}
