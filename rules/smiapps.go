package rules

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
)

// Rules over nvidia-smi --query-compute-apps logs (memory per process).

func init() {
	register(&Rule{
		ID:          "smi.zombie",
		Description: "nvidia-smi per process: a process keeps GPU memory, unchanged, after the others on its GPU exited (a leftover from an earlier run)",
		Severity:    Warning,
		Threshold:   0,
		Unit:        "bytes",
		Reads:       []SourceKind{SourceSMIApps},
		Check: func(r *Rule, in *Input) []Finding {
			var out []Finding
			for _, p := range in.appsAnalysis().Zombies() {
				if float64(p.FinalBytes) < r.Threshold {
					continue
				}
				out = append(out, Finding{
					Title:   fmt.Sprintf("%s holds %s after the others exited", smi.ProcessRef(p.PID, p.Name), memtimeline.FormatBytes(p.FinalBytes)),
					Detail:  fmt.Sprintf("It %s.", p.ZombieReason),
					Advice:  fmt.Sprintf("If pid %d is a leftover of an earlier run (a DataLoader worker, a notebook kernel, a crashed job's child), end it (kill %d): its memory is not free for the next run.", p.PID, p.PID),
					Metrics: map[string]float64{"bytes": float64(p.FinalBytes), "pid": float64(p.PID)},
				})
			}
			return out
		},
	})
}

// smiOptions are how the input's nvidia-smi logs are analyzed: its
// options from Evaluate (Options.SMI), else smi's defaults.
func (in *Input) smiOptions() smi.Options {
	if in.smiOpts != nil {
		return *in.smiOpts
	}
	return smi.DefaultOptions()
}

// SMIAnalysis is the nvidia-smi log's analysis with the input's options:
// the one analysis behind the smi rules, the leak evidence and the smi
// command's tables (memoized). Zero without a log.
func (in *Input) SMIAnalysis() smi.Analysis { return in.smiAnalysisWith(in.smiOptions()) }

// smiAnalysisWith is the log's analysis with o, memoized per options: the
// smi rules set one option each from their threshold, which is the
// input's own unless a config changed it, so they share one analysis.
func (in *Input) smiAnalysisWith(o smi.Options) smi.Analysis {
	if !in.Has(SourceSMI) {
		return smi.Analysis{Options: o}
	}
	return Get(in, NewKey[smi.Analysis](fmt.Sprintf("smi:%+v", o)), func() smi.Analysis { return smi.Analyze(in.SMI, o) })
}

// appsAnalysis is a compute-apps log's analysis on its own, without the GPU
// log (memoized; the verdict's GPU entry joins the two).
func (in *Input) appsAnalysis() smi.AppsAnalysis { return in.AppsAnalysisBeside(nil) }

// AppsAnalysisBeside is the compute-apps log's analysis joined with the
// GPU log of gpu (nil: none), memoized per GPU log and options: the
// verdict's GPU entry and the smi command's per-process table share it.
func (in *Input) AppsAnalysisBeside(gpu *Input) smi.AppsAnalysis {
	o := in.smiOptions()
	var log *smi.Log
	name := ""
	if gpu != nil && gpu.Has(SourceSMI) {
		log, name = gpu.SMI, gpu.Source
	}
	return Get(in, NewKey[smi.AppsAnalysis](fmt.Sprintf("smi:apps:%q:%+v", name, o)), func() smi.AppsAnalysis {
		return smi.AnalyzeApps(in.SMIApps, log, o)
	})
}
