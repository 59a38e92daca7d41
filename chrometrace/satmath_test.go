package chrometrace

import (
	"math"
	"math/big"
	"strings"
	"testing"
)

func TestSaturatingArithmetic(t *testing.T) {
	vals := []int64{0, 1, -1, 2, 1 << 62, -(1 << 62), math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, 12345}
	sat := func(x *big.Int) int64 {
		if x.Cmp(big.NewInt(math.MaxInt64)) > 0 {
			return math.MaxInt64
		}
		if x.Cmp(big.NewInt(math.MinInt64)) < 0 {
			return math.MinInt64
		}
		return x.Int64()
	}
	for _, a := range vals {
		for _, b := range vals {
			if got, want := AddSat(a, b), sat(new(big.Int).Add(big.NewInt(a), big.NewInt(b))); got != want {
				t.Errorf("AddSat(%d, %d) = %d, want %d", a, b, got, want)
			}
			if got, want := SubSat(a, b), sat(new(big.Int).Sub(big.NewInt(a), big.NewInt(b))); got != want {
				t.Errorf("SubSat(%d, %d) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// A trace claiming 2^63-1 bytes in one event: every operator's numbers
// stay non-negative (they wrapped to "-8589934592.00 GB") and the operator
// after it keeps its own 1 MiB.
func TestOperatorSumsSaturate(t *testing.T) {
	const trace = `{"traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
 {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
 {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 15, "args": {"Bytes": 9223372036854775807, "Device Id": 0, "Device Type": 1, "Addr": 4096}},
 {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 16, "args": {"Bytes": 9223372036854775807, "Device Id": 0, "Device Type": 1, "Addr": 8192}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::zeros", "pid": 1, "tid": 1, "ts": 40, "dur": 20},
 {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 45, "args": {"Bytes": 1048576, "Device Id": 0, "Device Type": 1, "Addr": 12288}}
]}`
	tr, err := Read(strings.NewReader(trace), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range Operators(tr, OperatorOptions{}) {
		if op.SelfDeviceMemory < 0 || op.DeviceMemory < 0 || op.AllocBytes < 0 {
			t.Errorf("%s: self %d, total %d, alloc bytes %d", op.Name, op.SelfDeviceMemory, op.DeviceMemory, op.AllocBytes)
		}
		if op.Name == "aten::zeros" && op.SelfDeviceMemory != 1<<20 {
			t.Errorf("aten::zeros: self %d, want 1 MiB", op.SelfDeviceMemory)
		}
	}
}
