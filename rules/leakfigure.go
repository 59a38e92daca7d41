package rules

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
)

// Figure is the leak's size as every output prints it: bytes per step,
// or for growth seen only in time (an nvidia-smi log with no steps log
// that lines up) its rate; never "0 B per step".
func (l LeakAnswer) Figure() string {
	rate := fmt.Sprintf("%.1f MiB/s", l.BytesPerSecond/(1<<20))
	switch {
	case l.BytesPerStep > 0 && l.BytesPerSecond > 0:
		return memtimeline.FormatBytes(l.BytesPerStep) + " per step (" + rate + ")"
	case l.BytesPerStep > 0:
		return memtimeline.FormatBytes(l.BytesPerStep) + " per step"
	case l.BytesPerSecond > 0:
		return rate + " (nvidia-smi counts no steps: add the run's steps log for a figure per step)"
	}
	return "growth of unmeasured size"
}
