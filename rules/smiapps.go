package rules

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
)

// Rules over nvidia-smi --query-compute-apps logs (memory per process).

func init() {
	Register(&Rule{
		ID:          "smi.zombie",
		Description: "nvidia-smi per process: a process keeps GPU memory, unchanged, after the others on its GPU exited (a leftover from an earlier run)",
		Severity:    Warning,
		Threshold:   0,
		Unit:        "bytes",
		Check: func(r *Rule, in *Input) []Finding {
			if in.SMIApps == nil {
				return nil
			}
			var out []Finding
			for _, p := range in.AppsAnalysis().Zombies() {
				if float64(p.FinalBytes) < r.Threshold {
					continue
				}
				out = append(out, Finding{
					Title:   fmt.Sprintf("pid %d (%s) holds %s after the others exited", p.PID, baseProc(p.Name), memtimeline.FormatBytes(p.FinalBytes)),
					Detail:  fmt.Sprintf("It %s.", p.ZombieReason),
					Advice:  fmt.Sprintf("If pid %d is a leftover of an earlier run (a DataLoader worker, a notebook kernel, a crashed job's child), end it (kill %d): its memory is not free for the next run.", p.PID, p.PID),
					Metrics: map[string]float64{"bytes": float64(p.FinalBytes), "pid": float64(p.PID)},
				})
			}
			return out
		},
	})
}

var keyApps = NewKey[smi.AppsAnalysis]("smi:apps")

// AppsAnalysis is a compute-apps log's analysis on its own, without the GPU
// log (memoized; the verdict's GPU entry joins the two).
func (in *Input) AppsAnalysis() smi.AppsAnalysis {
	return Get(in, keyApps, func() smi.AppsAnalysis { return smi.AnalyzeApps(in.SMIApps, nil, smi.DefaultOptions()) })
}
