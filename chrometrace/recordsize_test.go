package chrometrace

import (
	"testing"
	"unsafe"
)

// The records a large trace holds millions of keep their packed sizes: a
// field added or reordered carelessly grows every trace's model (a
// million host ops at 64 bytes instead of 56 are 8 MB more).
func TestRecordSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"HostOp", unsafe.Sizeof(HostOp{}), 56},
		{"PyFrame", unsafe.Sizeof(PyFrame{}), 32},
		{"MemoryEvent", unsafe.Sizeof(MemoryEvent{}), 48},
		{"DeviceOp", unsafe.Sizeof(DeviceOp{}), 48},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d bytes, want %d", c.name, c.got, c.want)
		}
	}
}

// A "Fwd thread id" beyond int32 (only a forged trace writes one) reads as
// absent rather than wrapped.
func TestFwdThreadBeyondInt32(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want int32
	}{{7, 7}, {-1, -1}, {1 << 31, -1}, {-1 << 40, -1}, {1<<31 - 1, 1<<31 - 1}} {
		if got := int32Or(c.in, -1); got != c.want {
			t.Errorf("int32Or(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}
