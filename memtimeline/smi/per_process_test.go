package smi

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// The recordings of issue 33 (testdata/smi/per_process, made by
// examples/record/smi_record.sh on an H200): per scenario, a 200 ms
// nvidia-smi GPU log, the compute-apps log beside it, the trainer's steps
// log, and truth.json with what was planted and torch's own figures per
// step (memory_reserved() and mem_get_info() read in the process).

type perProcessTruth struct {
	TrainerPID int64 `json:"trainer_pid"`
	Steps      int   `json:"steps"`
	Holder     *struct {
		PID int64 `json:"pid"`
	} `json:"holder"`
	Grower *struct {
		PID        int64   `json:"pid"`
		MiBPerTick float64 `json:"mib_per_tick"`
		Tick       float64 `json:"tick_seconds"`
	} `json:"grower"`
	Leak *struct {
		BytesPerStep int64 `json:"bytes_per_step"`
	} `json:"leak"`
	TorchPerStep []struct {
		Step       int64   `json:"step"`
		Time       float64 `json:"time"`
		Reserved   int64   `json:"reserved"`
		DeviceUsed int64   `json:"device_used"`
	} `json:"torch_per_step"`
}

type perProcessRun struct {
	truth perProcessTruth
	gpu   *Log
	apps  *AppsLog
	steps *steplog.Log
}

func loadPerProcess(t *testing.T, scenario string) perProcessRun {
	t.Helper()
	dir := memtest.Testdata("smi", "per_process", scenario)
	var r perProcessRun
	memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &r.truth)
	r.gpu = memtest.Decode(t, filepath.Join(dir, "nvidia_smi.csv"), Read)
	r.apps = memtest.Decode(t, filepath.Join(dir, "compute_apps.csv"), ReadApps)
	r.steps = memtest.Decode(t, memtest.GlobOne(t, dir, "*.steps.jsonl"), steplog.Read)
	return r
}

func (r perProcessRun) torchPoints() []TorchPoint {
	var out []TorchPoint
	for _, rec := range r.steps.Series[0].Records {
		sec, frac := math.Modf(rec.Time)
		out = append(out, TorchPoint{Step: rec.Step, Time: time.Unix(int64(sec), int64(frac*1e9)).UTC(),
			AllocatedBytes: rec.AllocatedBytes, ReservedBytes: rec.ReservedBytes})
	}
	return out
}

// TestPerProcessRead: the compute-apps logs read whole, each process under
// the pid the recording wrote down.
func TestPerProcessRead(t *testing.T) {
	for _, sc := range []string{"healthy", "leak", "shared"} {
		r := loadPerProcess(t, sc)
		if !r.apps.HasTime || r.apps.Rows == 0 || len(r.apps.Warnings) > 0 {
			t.Errorf("%s: has time %v, rows %d, warnings %v", sc, r.apps.HasTime, r.apps.Rows, r.apps.Warnings)
		}
		want := map[int64]bool{r.truth.TrainerPID: true}
		if r.truth.Holder != nil {
			want[r.truth.Holder.PID], want[r.truth.Grower.PID] = true, true
		}
		got := map[int64]bool{}
		for _, p := range r.apps.Processes {
			got[p.PID] = true
			if p.GPUUUID != r.gpu.GPUs[0].UUID || p.Name != "python3" {
				t.Errorf("%s: pid %d on %q named %q, want the GPU log's %q, python3", sc, p.PID, p.GPUUUID, p.Name, r.gpu.GPUs[0].UUID)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: pids %v, want %v", sc, got, want)
		}
		for pid := range want {
			if !got[pid] {
				t.Errorf("%s: pid %d missing", sc, pid)
			}
		}
	}
}

// TestPerProcessHealthy: one process, no zombie, no sharing, no growth: its
// start-up (model, data in eight 128 MiB chunks) is not growth, and no
// smi leak is claimed on the GPU log either.
func TestPerProcessHealthy(t *testing.T) {
	r := loadPerProcess(t, "healthy")
	a := AnalyzeApps(r.apps, r.gpu, DefaultOptions())
	if len(a.Processes) != 1 || a.Processes[0].PID != r.truth.TrainerPID {
		t.Fatalf("processes %+v", a.Processes)
	}
	p := a.Processes[0]
	if !p.Exited || p.Zombie || p.Grows != nil || p.StillGrowing != nil || len(a.Sharing) != 0 {
		t.Errorf("trainer: exited %v zombie %v grows %v still %v sharing %v", p.Exited, p.Zombie, p.Grows, p.StillGrowing, a.Sharing)
	}
	g := Analyze(r.gpu, DefaultOptions()).GPUs[0]
	if len(g.Leaks) != 0 || g.StillGrowing != nil {
		t.Errorf("healthy GPU log: leaks %+v, still growing %+v", g.Leaks, g.StillGrowing)
	}
	if len(g.Runs) == 0 {
		t.Errorf("no growth run at all: the start-up should be one (judged not a leak)")
	}
	// memory.used minus the processes: the driver's own few MiB.
	if len(a.Unaccounted) != 1 || a.Unaccounted[0].Bytes != 9<<20 {
		t.Errorf("unaccounted %+v, want 9 MiB", a.Unaccounted)
	}
}

// TestPerProcessShared: the holder is named a zombie (it outlived the
// trainer, unchanged, with the GPU idle), the three processes are named as
// sharing the GPU, and the grower as still growing when it exited, at the
// planted rate.
func TestPerProcessShared(t *testing.T) {
	r := loadPerProcess(t, "shared")
	a := AnalyzeApps(r.apps, r.gpu, DefaultOptions())
	z := a.Zombies()
	if len(z) != 1 || z[0].PID != r.truth.Holder.PID {
		t.Fatalf("zombies %+v, want the holder %d", z, r.truth.Holder.PID)
	}
	if z[0].ZombieSince.IsZero() || z[0].ZombieReason == "" {
		t.Errorf("zombie without since or reason: %+v", z[0])
	}
	trainer := a.Process(r.truth.TrainerPID)
	if trainer == nil || !trainer.Exited || trainer.Zombie {
		t.Errorf("trainer %+v", trainer)
	}
	if len(a.Sharing) != 1 || a.Sharing[0].MaxProcesses != 3 || len(a.Sharing[0].PIDs) != 3 || a.Sharing[0].GPUKey != "0" {
		t.Fatalf("sharing %+v, want one stretch of 3 processes on GPU 0", a.Sharing)
	}
	g := a.Process(r.truth.Grower.PID)
	if g == nil || g.StillGrowing == nil || g.Grows != nil {
		t.Fatalf("grower %+v", g)
	}
	planted := r.truth.Grower.MiBPerTick / r.truth.Grower.Tick // MiB/s
	if got := g.StillGrowing.SlopeBytesPerSec / (1 << 20); math.Abs(got-planted) > 0.1*planted {
		t.Errorf("grower rate %.1f MiB/s, planted %.1f", got, planted)
	}
	// Only the grower grows: the holder and the trainer settle.
	for _, p := range a.Processes {
		if p.PID != g.PID && (p.StillGrowing != nil || p.Grows != nil) {
			t.Errorf("pid %d called growing", p.PID)
		}
	}
	// Without the GPU log the holder is still a zombie: it outlived the
	// trainer in the apps log itself.
	if z := AnalyzeApps(r.apps, nil, DefaultOptions()).Zombies(); len(z) != 1 || z[0].PID != r.truth.Holder.PID {
		t.Errorf("apps log alone: zombies %+v", z)
	}
}

// TestPerProcessSnapshotOnce: one compute-apps query without timestamps
// (nvidia-smi --query-compute-apps=pid,process_name,used_memory
// --format=csv) taken during the shared run.
func TestPerProcessSnapshotOnce(t *testing.T) {
	apps := memtest.Decode(t, memtest.Testdata("smi", "per_process", "compute_apps_once.csv"), ReadApps)
	if apps.HasTime || apps.Rounds != 1 || len(apps.Processes) != 2 {
		t.Fatalf("time %v rounds %d processes %d", apps.HasTime, apps.Rounds, len(apps.Processes))
	}
	a := AnalyzeApps(apps, nil, DefaultOptions())
	if len(a.Sharing) != 1 || a.Sharing[0].MaxProcesses != 2 || len(a.Zombies()) != 0 {
		t.Errorf("sharing %+v zombies %+v", a.Sharing, a.Zombies())
	}
}

// TestReconcileRecordings: memory.used = torch's reserved + a constant
// 751 MiB at every steady step, to the MiB, as mem_get_info() measured in
// the process (its total - free is smi's figure to within the MiB it
// rounds to); the trainer's own process figure is 742 MiB above reserved;
// in the shared run the gap holds the other processes too.
func TestReconcileRecordings(t *testing.T) {
	for _, sc := range []string{"healthy", "leak", "shared"} {
		r := loadPerProcess(t, sc)
		var procs []*Process
		for _, p := range r.apps.Processes {
			procs = append(procs, p)
		}
		rec, ok := Reconcile(r.gpu.GPUs[0], r.torchPoints(), procs, DefaultOptions())
		if !ok {
			t.Fatalf("%s: not reconciled", sc)
		}
		if rec.ClockOffset != 0 {
			t.Errorf("%s: clock offset %s on a machine in UTC", sc, rec.ClockOffset)
		}
		if rec.Steps < r.truth.Steps-2 || rec.Stable < r.truth.Steps/2 {
			t.Errorf("%s: %d steps aligned, %d steady, of %d", sc, rec.Steps, rec.Stable, r.truth.Steps)
		}
		if rec.TorchPID != r.truth.TrainerPID || rec.ProcessGapBytes != 742<<20 {
			t.Errorf("%s: torch's process %d with gap %d MiB, want %d with 742 MiB", sc, rec.TorchPID, rec.ProcessGapBytes>>20, r.truth.TrainerPID)
		}
		// mem_get_info's total - free - reserved at the same steps.
		truthGap := map[int64]int64{}
		for _, s := range r.truth.TorchPerStep {
			truthGap[s.Step] = s.DeviceUsed - s.Reserved
		}
		for _, p := range rec.Points {
			if !p.Stable {
				continue
			}
			// (In the shared run the grower allocates between the step's
			// mem_get_info() and smi's sample: there the process's own
			// figure is checked, above.)
			if d := p.OutsideBytes - truthGap[p.Step]; sc != "shared" && (d < 0 || d > 1<<20) {
				t.Errorf("%s step %d: smi - reserved = %d B, mem_get_info says %d B", sc, p.Step, p.OutsideBytes, truthGap[p.Step])
			}
			if p.CacheBytes < 0 || p.AllocatedBytes+p.CacheBytes+p.OutsideBytes != p.UsedBytes {
				t.Errorf("%s step %d: split %+v does not add up", sc, p.Step, p)
			}
		}
		switch sc {
		case "shared":
			if rec.Constant || rec.OthersBytes < 2<<30 {
				t.Errorf("shared: constant %v, others %d", rec.Constant, rec.OthersBytes)
			}
		default:
			if !rec.Constant || rec.GapBytes != 751<<20 || rec.GapMin != rec.GapMax || rec.GapGrows || rec.OthersBytes != 0 {
				t.Errorf("%s: gap %d MiB (%d..%d) constant %v grows %v others %d", sc, rec.GapBytes>>20, rec.GapMin>>20, rec.GapMax>>20, rec.Constant, rec.GapGrows, rec.OthersBytes)
			}
		}
	}
}

// TestReconcileClockOffset: a log written on a machine 2 hours ahead of
// UTC (nvidia-smi prints local time, the steps log Unix time) is put on
// the steps' clock; a log of another day is not reconciled.
func TestReconcileClockOffset(t *testing.T) {
	r := loadPerProcess(t, "healthy")
	g := *r.gpu.GPUs[0]
	g.Samples = append([]Sample(nil), g.Samples...)
	for i := range g.Samples {
		g.Samples[i].Time = g.Samples[i].Time.Add(2 * time.Hour)
	}
	rec, ok := Reconcile(&g, r.torchPoints(), nil, DefaultOptions())
	if !ok || rec.ClockOffset != -2*time.Hour || rec.GapBytes != 751<<20 || rec.TorchPID != -1 {
		t.Errorf("offset %s ok %v gap %d pid %d", rec.ClockOffset, ok, rec.GapBytes>>20, rec.TorchPID)
	}
	for i := range g.Samples {
		g.Samples[i].Time = g.Samples[i].Time.Add(24 * time.Hour)
	}
	if _, ok := Reconcile(&g, r.torchPoints(), nil, DefaultOptions()); ok {
		t.Errorf("logs a day apart reconciled")
	}
}

// TestStillGrowingLeakRecording: the leaking run's GPU log shows 8.5 s of
// growth, 256 MiB every 2 s (the allocator reserving the 32 MiB per step
// in chunks), up to the process's exit: too short for a leak from
// nvidia-smi alone, and not a plateau either. Its rate is the leak's, not
// the start-up's; PerStep turns it into bytes per step by the steps log.
func TestStillGrowingLeakRecording(t *testing.T) {
	r := loadPerProcess(t, "leak")
	g := Analyze(r.gpu, DefaultOptions()).GPUs[0]
	if len(g.Leaks) != 0 {
		t.Fatalf("a leak from 5 rises: %+v", g.Leaks)
	}
	s := g.StillGrowing
	if s == nil {
		t.Fatal("the leak run's growth up to exit not seen")
	}
	planted := float64(r.truth.Leak.BytesPerStep) / 0.25 // 0.25 s a step
	if math.Abs(s.SlopeBytesPerSec-planted) > 0.15*planted {
		t.Errorf("rate %.1f MiB/s, planted %.1f", s.SlopeBytesPerSec/(1<<20), planted/(1<<20))
	}
	var times []time.Time
	for _, p := range r.torchPoints() {
		times = append(times, p.Time)
	}
	per, n := PerStep(r.gpu.GPUs[0], *s, times)
	if n < 20 || math.Abs(float64(per-r.truth.Leak.BytesPerStep)) > 0.2*float64(r.truth.Leak.BytesPerStep) {
		t.Errorf("per step %d B over %d steps, planted %d", per, n, r.truth.Leak.BytesPerStep)
	}
}

// TestReconcileGapGrows: memory.used rising while torch's reserved holds
// still is memory outside torch's allocator, and the answer says so. The
// healthy recording with 4 MiB added to memory.used every 200 ms sample of
// its plateau (what NCCL buffers or a library's own cudaMalloc look like).
func TestReconcileGapGrows(t *testing.T) {
	r := loadPerProcess(t, "healthy")
	pts := r.torchPoints()
	g := *r.gpu.GPUs[0]
	g.Samples = append([]Sample(nil), g.Samples...)
	from := pts[2].Time
	var k int64
	for i := range g.Samples {
		if !g.Samples[i].Time.Before(from) && g.Samples[i].UsedBytes > 1<<30 {
			k++
			g.Samples[i].UsedBytes += k * 4 << 20
		}
	}
	rec, ok := Reconcile(&g, pts, nil, DefaultOptions())
	if !ok || rec.Constant || !rec.GapGrows || rec.ReservedGrowthBytes != 0 || rec.GapGrowthBytes < 100<<20 {
		t.Fatalf("ok %v constant %v grows %v (%d MiB, reserved %d MiB)", ok, rec.Constant, rec.GapGrows, rec.GapGrowthBytes>>20, rec.ReservedGrowthBytes>>20)
	}
	if a := rec.Answer(); !strings.Contains(a, "outside torch's allocator") {
		t.Errorf("answer %q", a)
	}
}

// TestAppsGPUMapping: processes map to the GPU log's GPUs by UUID or by
// bus id (nvidia-smi pads the domain to 8 digits in one query and may
// not in another); a process on a GPU the log lacks stays unmapped.
func TestAppsGPUMapping(t *testing.T) {
	gpus := readSMIString(t, "timestamp, index, pci.bus_id, uuid, memory.used [MiB]\n"+
		"2026/12/01 21:00:00.000, 0, 00000000:19:00.0, GPU-aaaa, 100 MiB\n"+
		"2026/12/01 21:00:00.000, 1, 00000000:3B:00.0, GPU-bbbb, 200 MiB\n")
	apps := readAppsString(t, "timestamp, pid, process_name, used_gpu_memory [MiB], gpu_bus_id, gpu_uuid\n"+
		"2026/12/01 21:00:00.000, 1, a, 90 MiB, 0000:19:00.0, [N/A]\n"+
		"2026/12/01 21:00:00.000, 2, b, 150 MiB, 00000000:3b:00.0, GPU-bbbb\n"+
		"2026/12/01 21:00:00.000, 3, c, 40 MiB, 00000000:5E:00.0, GPU-cccc\n")
	a := AnalyzeApps(apps, gpus, DefaultOptions())
	got := map[int64]string{}
	for _, p := range a.Processes {
		got[p.PID] = p.GPUKey
	}
	if got[1] != "0" || got[2] != "1" || got[3] != "" {
		t.Errorf("GPU keys %v, want 1->0, 2->1, 3 unmapped", got)
	}
	if len(a.Sharing) != 0 {
		t.Errorf("processes on different GPUs called sharing: %+v", a.Sharing)
	}
}

// TestAppsSharingCountsProcessesNotRows: one process listed twice in a
// round (two contexts, a log appended to itself) is not a GPU shared. The
// healthy recording (one trainer) with every row written twice; the shared
// recording still shares with its three processes.
func TestAppsSharingCountsProcessesNotRows(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(memtest.Testdata("smi", "per_process", "healthy"), "compute_apps.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var b strings.Builder
	b.WriteString(lines[0] + "\n")
	for _, l := range lines[1:] {
		b.WriteString(l + "\n" + l + "\n")
	}
	a := AnalyzeApps(readAppsString(t, b.String()), nil, DefaultOptions())
	if len(a.Processes) != 1 || len(a.Sharing) != 0 {
		t.Errorf("one process with doubled rows: %d processes, sharing %+v", len(a.Processes), a.Sharing)
	}
	r := loadPerProcess(t, "shared")
	s := AnalyzeApps(r.apps, r.gpu, DefaultOptions()).Sharing
	if len(s) != 1 || s[0].MaxProcesses != 3 || len(s[0].PIDs) != 3 {
		t.Errorf("shared recording: %+v", s)
	}
}
