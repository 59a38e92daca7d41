package rules

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/leak"
)

// The verdict's GPU entry: what nvidia-smi sees against torch's own
// numbers, and who holds the GPU's memory. It answers the two questions
// people bring from nvidia-smi: "which number do I believe" (memory.used
// split into torch allocated, torch's cache, and what is outside torch)
// and "which process holds this memory" (zombies, processes sharing a GPU,
// the process that grows).

// GPUAnswer is the verdict's GPU entry for one run and rank.
type GPUAnswer struct {
	// SMISource is the nvidia-smi --query-gpu log, AppsSource the
	// --query-compute-apps log, TorchSource the steps log the split uses.
	SMISource   string `json:"smi_source,omitempty"`
	AppsSource  string `json:"apps_source,omitempty"`
	TorchSource string `json:"torch_source,omitempty"`
	// Split answers "which number do I believe"; Reconciled holds its
	// figures. Empty when no steps log of the same time is given.
	Split      string              `json:"split,omitempty"`
	Reconciled *smi.Reconciliation `json:"reconciled,omitempty"`
	// Processes says who holds the memory: zombies, sharing, growth.
	Processes string            `json:"processes,omitempty"`
	Apps      *smi.AppsAnalysis `json:"apps,omitempty"`
}

// maxSplitGPUs bounds the GPUs of one log tried for the split; a log with
// more is tried on the GPU the steps log names only.
const maxSplitGPUs = 16

// judgeGPU builds the GPU entry from a run's nvidia-smi logs and its steps
// log; nil when the run has no nvidia-smi log.
func judgeGPU(ins []*Input) *GPUAnswer {
	var gpuIn, appsIn, stepsIn *Input
	for _, in := range ins {
		switch {
		case in.Has(SourceSMI) && gpuIn == nil:
			gpuIn = in
		case in.Has(SourceSMIApps) && appsIn == nil:
			appsIn = in
		case in.StepLog != nil && stepsIn == nil: // a steps log, or memory_summary() tables as steps
			stepsIn = in
		}
	}
	if gpuIn == nil && appsIn == nil {
		return nil
	}
	ans := &GPUAnswer{}
	var log *smi.Log
	if gpuIn != nil {
		ans.SMISource, log = gpuIn.Source, gpuIn.SMI
	}
	var apps *smi.AppsLog
	if appsIn != nil {
		ans.AppsSource, apps = appsIn.Source, appsIn.SMIApps
		a := appsIn.AppsAnalysisBeside(gpuIn)
		ans.Apps = &a
		ans.Processes = processesSentence(a)
	}
	if log != nil && stepsIn != nil {
		procsOn := map[string][]*smi.Process{} // GPU key -> its processes
		if apps != nil {
			for i, p := range apps.Processes {
				k := ans.Apps.Processes[i].GPUKey
				procsOn[k] = append(procsOn[k], p)
			}
		}
		timed := false
		for _, ser := range stepsIn.StepLog.Series {
			pts := torchPoints(ser.Records)
			if len(pts) == 0 {
				continue
			}
			timed = true
			for _, g := range log.GPUs {
				if len(log.GPUs) > maxSplitGPUs && g.Key != ser.Device {
					continue // a node has a few GPUs; past that, the series' own
				}
				var procs []*smi.Process
				if apps != nil {
					procs = procsOn[g.Key]
					if procs == nil {
						procs = []*smi.Process{} // an apps log with none on this GPU
					}
				}
				r, ok := smi.Reconcile(g, pts, procs, smi.DefaultOptions())
				if !ok || (ans.Reconciled != nil && !betterSplit(r, *ans.Reconciled, ser.Device)) {
					continue
				}
				ans.Reconciled, ans.TorchSource = &r, stepsIn.Source
			}
		}
		switch {
		case ans.Reconciled != nil:
			ans.Split = ans.Reconciled.Answer()
			if len(log.GPUs) > 1 {
				ans.Split = "GPU " + ans.Reconciled.GPUKey + ": " + ans.Split
			}
		case !timed:
			// Said, not dropped: the user gave both logs to get this answer.
			ans.Split = "memory.used not split by torch's numbers: the steps log has no time " +
				"(seconds since the epoch, as time.time()) or no reserved bytes per step, so its " +
				"steps cannot be put on nvidia-smi's timeline; the snippet's steps.jsonl has both"
		default:
			ans.Split = "memory.used not split by torch's numbers: no step of the steps log falls " +
				"inside the nvidia-smi log's span at any time-zone offset (not the same run, or its " +
				"times are not seconds since the epoch as time.time() writes them)"
		}
	}
	if ans.Split == "" && ans.Processes == "" {
		return nil
	}
	return ans
}

// torchPoints are a steps series' records with a time and reserved bytes.
func torchPoints(recs []steplog.Record) []smi.TorchPoint {
	var out []smi.TorchPoint
	for _, r := range recs {
		if !r.HasTime || r.ReservedBytes < 0 {
			continue
		}
		sec, frac := math.Modf(r.Time)
		out = append(out, smi.TorchPoint{Step: r.Step, Time: time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(),
			AllocatedBytes: r.AllocatedBytes, ReservedBytes: r.ReservedBytes})
	}
	return out
}

// betterSplit reports whether a is the better match of a steps series
// (on device dev) to a GPU of a multi-GPU log than b: torch's process found
// on it or a constant gap (the GPU whose memory follows torch's reserved),
// then the GPU the series names (CUDA_VISIBLE_DEVICES may renumber it),
// then the narrower gap, then more steps.
func betterSplit(a, b smi.Reconciliation, dev string) bool {
	follows := func(r smi.Reconciliation) bool { return r.TorchPID >= 0 || r.Constant }
	if follows(a) != follows(b) {
		return follows(a)
	}
	if (a.GPUKey == dev) != (b.GPUKey == dev) {
		return a.GPUKey == dev
	}
	if wa, wb := a.GapMax-a.GapMin, b.GapMax-b.GapMin; wa != wb {
		return wa < wb
	}
	return a.Steps > b.Steps
}

// processesSentence says who holds the memory, zombies first.
func processesSentence(a smi.AppsAnalysis) string {
	var parts []string
	for _, p := range a.Zombies() {
		parts = append(parts, fmt.Sprintf("zombie: %s %s", smi.ProcessRef(p.PID, p.Name), p.ZombieReason))
	}
	for _, p := range a.Processes {
		if p.Grows != nil {
			parts = append(parts, fmt.Sprintf("%s grows: %s at %.1f MiB/s", smi.ProcessRef(p.PID, p.Name), memtimeline.FormatBytes(p.Grows.GrowthBytes), p.Grows.SlopeBytesPerSec/(1<<20)))
		} else if g := p.StillGrowing; g != nil {
			when := "when the log ended"
			if p.Exited {
				when = "when it exited"
			}
			parts = append(parts, fmt.Sprintf("%s was still growing %s (%s in %s, %.1f MiB/s)", smi.ProcessRef(p.PID, p.Name), when,
				memtimeline.FormatBytes(g.GrowthBytes), g.Duration.Round(100*time.Millisecond), g.SlopeBytesPerSec/(1<<20)))
		}
	}
	for _, s := range a.Sharing {
		var pids []string
		for _, pid := range s.PIDs {
			pids = append(pids, fmt.Sprint(pid))
		}
		gpu := ""
		if s.GPUKey != "" {
			gpu = " GPU " + s.GPUKey
		}
		d := ""
		if !s.Start.IsZero() {
			d = " for " + s.End.Sub(s.Start).Round(100*time.Millisecond).String()
		}
		parts = append(parts, fmt.Sprintf("%d %s shared%s%s (pids %s; %s together at most)", s.MaxProcesses, fmtutil.Plural(float64(s.MaxProcesses), "process", "processes"), gpu, d, strings.Join(pids, ", "), memtimeline.FormatBytes(s.PeakBytes)))
	}
	if len(parts) == 0 {
		var procs []string
		for _, p := range a.Processes {
			procs = append(procs, procLabel(a, p.PID))
		}
		switch len(procs) {
		case 0:
			return "no process held GPU memory in the compute-apps log"
		default:
			return "one process at a time, none left holding memory: " + strings.Join(procs, ", ")
		}
	}
	return strings.Join(parts, "; ")
}

func procLabel(a smi.AppsAnalysis, pid int64) string {
	p := a.Process(pid)
	if p == nil {
		return fmt.Sprintf("pid %d", pid)
	}
	s := strings.TrimSpace(fmt.Sprintf("pid %d %s", pid, smi.ProcessName(p.Name)))
	if p.PeakBytes >= 0 {
		s += " peak " + memtimeline.FormatBytes(p.PeakBytes)
	}
	return s
}

// smiLeakRates gives nvidia-smi leak evidence a figure per step where a
// steps log of the same run has times inside the growth: the growth over
// the steps that ran while it grew.
func smiLeakRates(ev []LeakEvidence, ins []*Input) {
	for i := range ev {
		e := &ev[i]
		if e.Kind != SourceSMI || e.Verdict != leak.VerdictLeak || e.smiRun == nil {
			continue
		}
		var g *smi.GPU
		for _, in := range ins {
			if in.Source == e.Source && in.Has(SourceSMI) {
				g = in.SMI.GPU(e.smiGPU)
			}
		}
		if g == nil {
			continue
		}
		for _, in := range ins {
			if in.StepLog == nil {
				continue
			}
			for _, ser := range in.StepLog.Series {
				var times []time.Time
				for _, p := range torchPoints(ser.Records) {
					times = append(times, p.Time)
				}
				if per, n := smi.PerStep(g, *e.smiRun, times); n >= 2 {
					e.BytesPerStep, e.Steps = per, n
					e.Reason += fmt.Sprintf("; %s per step over the %d steps of %s that ran while it grew", memtimeline.FormatBytes(per), n, filepath.Base(in.Source))
					break
				}
			}
			if e.Steps > 0 {
				break
			}
		}
	}
}
