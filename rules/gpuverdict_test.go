package rules

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/rules/leak"
)

// loadSMIDir reads every nvidia-smi log (GPU or per process, told apart by
// content as the loader does) and steps log of a folder.
func loadSMIDir(t *testing.T, dir string, names ...string) []*Input {
	t.Helper()
	var out []*Input
	for _, name := range names {
		path := filepath.Join(dir, name)
		if strings.Contains(name, "*") {
			path = memtest.GlobOne(t, dir, name)
		}
		if strings.HasSuffix(path, ".jsonl") {
			in := loadInput(t, path)
			in.Kind = SourceSteps
			out = append(out, in)
			continue
		}
		head, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		in := &Input{Source: path, Rank: -1}
		if smi.LooksLikeApps(head) {
			in.Kind, in.SMIApps = "nvidia-smi-apps", memtest.Decode(t, path, smi.ReadApps)
		} else {
			in.Kind, in.SMI = SourceSMI, memtest.Decode(t, path, smi.Read)
		}
		out = append(out, in)
	}
	return out
}

// TestVerdictSMILeakRate: nvidia-smi alone gives its leak as a rate, never
// "0 B per step"; with the run's steps log beside it, the smi figure is
// also per step (64 MiB planted per step, 0.25 s a step).
func TestVerdictSMILeakRate(t *testing.T) {
	dir := memtest.Testdata("smi")
	alone := judgeAll(loadSMIDir(t, dir, "nvidia_smi_leak.csv"))
	if len(alone) != 1 {
		t.Fatalf("%d verdicts", len(alone))
	}
	l := alone[0].Leak
	if l.Verdict != leak.VerdictLeak || l.BytesPerStep != 0 || math.Abs(l.BytesPerSecond/(1<<20)-256) > 8 {
		t.Errorf("smi alone: %s %d B/step %.1f MiB/s, want a leak of about 256 MiB/s", l.Verdict, l.BytesPerStep, l.BytesPerSecond/(1<<20))
	}
	if f := l.Figure(); !strings.Contains(f, "MiB/s") || strings.Contains(f, "0 B") {
		t.Errorf("figure %q", f)
	}
	both := judgeAll(loadSMIDir(t, dir, "nvidia_smi_leak.csv", "nvidia_smi_leak.steps.jsonl"))
	if len(both) != 1 {
		t.Fatalf("%d verdicts: the smi log and its steps log are one run", len(both))
	}
	var smiEv *LeakEvidence
	for i, e := range both[0].Leak.Evidence {
		if e.Kind == SourceSMI {
			smiEv = &both[0].Leak.Evidence[i]
		}
	}
	const planted = 64 << 20
	if smiEv == nil || smiEv.Verdict != leak.VerdictLeak || smiEv.Steps < 70 || math.Abs(float64(smiEv.BytesPerStep-planted)) > 0.05*planted {
		t.Fatalf("smi evidence beside the steps log: %+v", smiEv)
	}
	if both[0].Leak.BytesPerStep != planted || !strings.Contains(both[0].Leak.Agreement, "MiB/s") {
		t.Errorf("verdict %d B/step, agreement %q", both[0].Leak.BytesPerStep, both[0].Leak.Agreement)
	}
}

// TestVerdictSMIRecordings: the verdict's GPU and PROC entries on the
// recordings of issue 33, and no leak claimed from a healthy run's smi log.
func TestVerdictSMIRecordings(t *testing.T) {
	files := []string{"nvidia_smi.csv", "compute_apps.csv", "*.steps.jsonl"}
	for _, sc := range []string{"healthy", "leak", "shared"} {
		dir := memtest.Testdata("smi", "per_process", sc)
		var truth struct {
			TrainerPID int64 `json:"trainer_pid"`
			Holder     *struct {
				PID int64 `json:"pid"`
			} `json:"holder"`
		}
		memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
		vs := judgeAll(loadSMIDir(t, dir, files...))
		if len(vs) != 1 {
			t.Fatalf("%s: %d verdicts, want one run", sc, len(vs))
		}
		v := vs[0]
		g := v.GPU
		if g == nil || g.Reconciled == nil || g.Apps == nil {
			t.Fatalf("%s: GPU entry %+v", sc, g)
		}
		if g.Reconciled.TorchPID != truth.TrainerPID || !strings.Contains(g.Split, "742.00 MB in torch's process") {
			t.Errorf("%s: split %q", sc, g.Split)
		}
		var smiEv LeakEvidence
		for _, e := range v.Leak.Evidence {
			if e.Kind == SourceSMI {
				smiEv = e
			}
		}
		switch sc {
		case "healthy":
			if v.Leak.Verdict != leak.VerdictClean || smiEv.Verdict != leak.VerdictClean {
				t.Errorf("healthy: %s, smi says %s (%s)", v.Leak.Verdict, smiEv.Verdict, smiEv.Reason)
			}
			if !strings.Contains(g.Split, "outside torch 751.00 MB") || !strings.Contains(g.Split, "constant") {
				t.Errorf("healthy split %q", g.Split)
			}
		case "leak":
			// The steps log has the leak; nvidia-smi saw 8.5 s of growth up
			// to the exit: it must not be counted as clean.
			if v.Leak.Verdict != leak.VerdictLeak || v.Leak.BytesPerStep != 32<<20 || smiEv.Verdict != leak.VerdictUnknown {
				t.Errorf("leak: %s %d B/step, smi %s (%s)", v.Leak.Verdict, v.Leak.BytesPerStep, smiEv.Verdict, smiEv.Reason)
			}
			if strings.Contains(v.Leak.Agreement, "nvidia-smi clean") {
				t.Errorf("leak: agreement %q", v.Leak.Agreement)
			}
		case "shared":
			if v.Leak.Verdict != leak.VerdictClean {
				t.Errorf("shared: %s", v.Leak.Verdict)
			}
			if z := g.Apps.Zombies(); len(z) != 1 || z[0].PID != truth.Holder.PID || !strings.Contains(g.Processes, "zombie: pid ") || !strings.Contains(g.Processes, "3 processes shared GPU 0") {
				t.Errorf("shared: processes %q", g.Processes)
			}
		}
	}
}

// TestVerdictSMIPicksTheRunsGPU: in a two-GPU log the split is made on the
// GPU whose memory follows the steps log's reserved, even when the steps
// log names another device (CUDA_VISIBLE_DEVICES=1 makes smi's GPU 1 torch's
// cuda:0). The healthy recording's GPU as GPU 1, and a GPU 0 added whose
// memory is GPU 1's shifted, scaled and rising 2 MiB a sample (another
// job's, busy).
func TestVerdictSMIPicksTheRunsGPU(t *testing.T) {
	dir := memtest.Testdata("smi", "per_process", "healthy")
	raw, err := os.ReadFile(filepath.Join(dir, "nvidia_smi.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var b strings.Builder
	b.WriteString(lines[0] + "\n")
	for i, l := range lines[1:] {
		f := strings.Split(l, ", ")
		// timestamp, index, uuid, bus, used, total, free, util
		other := append([]string(nil), f...)
		other[1], other[2], other[3] = "0", "GPU-other", "00000000:07:00.0"
		f[1] = "1"
		var mib int64
		if _, err := fmt.Sscanf(f[4], "%d MiB", &mib); err != nil {
			t.Fatal(err)
		}
		other[4] = fmt.Sprintf("%d MiB", 3000+mib*3/2+int64(i)*2)
		b.WriteString(strings.Join(other, ", ") + "\n" + strings.Join(f, ", ") + "\n")
	}
	tmp := t.TempDir()
	path := filepath.Join(tmp, "nvidia_smi.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ins := loadSMIDir(t, tmp, "nvidia_smi.csv")
	ins = append(ins, loadSMIDir(t, dir, "*.steps.jsonl")...)
	ins[1].Source = filepath.Join(tmp, filepath.Base(ins[1].Source)) // one folder: one run
	vs := judgeAll(ins)
	if len(vs) != 1 || vs[0].GPU == nil || vs[0].GPU.Reconciled == nil {
		t.Fatalf("verdicts %+v", vs)
	}
	if r := vs[0].GPU.Reconciled; r.GPUKey != "1" || !r.Constant || r.GapBytes != 751<<20 || !strings.HasPrefix(vs[0].GPU.Split, "GPU 1: ") {
		t.Errorf("split on GPU %s (constant %v, gap %d MiB): %s", r.GPUKey, r.Constant, r.GapBytes>>20, vs[0].GPU.Split)
	}
}

// TestVerdictSMISaysWhyNoSplit: given an smi log and a steps log that
// cannot be put on one timeline (a steps log without times, or with times
// not in seconds since the epoch), the GPU entry says so instead of
// dropping the split without a word. The healthy recording, its steps log
// rewritten both ways.
func TestVerdictSMISaysWhyNoSplit(t *testing.T) {
	dir := memtest.Testdata("smi", "per_process", "healthy")
	raw, err := os.ReadFile(memtest.GlobOne(t, dir, "*.steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	timeField := regexp.MustCompile(`"time": ([0-9.]+), `)
	for _, tc := range []struct{ name, want string }{
		{"no time", "the steps log has no time"},
		{"milliseconds", "no step of the steps log falls inside"},
	} {
		tmp := t.TempDir()
		for _, name := range []string{"nvidia_smi.csv", "compute_apps.csv"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		steps := timeField.ReplaceAllStringFunc(string(raw), func(m string) string {
			if tc.name == "no time" {
				return ""
			}
			sec, _ := strconv.ParseFloat(timeField.FindStringSubmatch(m)[1], 64)
			return fmt.Sprintf(`"time": %d, `, int64(sec*1000))
		})
		if steps == string(raw) {
			t.Fatal("the steps log has no time field to rewrite")
		}
		if err := os.WriteFile(filepath.Join(tmp, "run_rank0.steps.jsonl"), []byte(steps), 0o644); err != nil {
			t.Fatal(err)
		}
		vs := judgeAll(loadSMIDir(t, tmp, "nvidia_smi.csv", "compute_apps.csv", "run_rank0.steps.jsonl"))
		if len(vs) != 1 || vs[0].GPU == nil {
			t.Fatalf("%s: verdicts %+v", tc.name, vs)
		}
		if g := vs[0].GPU; g.Reconciled != nil || !strings.Contains(g.Split, tc.want) {
			t.Errorf("%s: split %q, want it to say %q", tc.name, g.Split, tc.want)
		}
	}
}

// TestVerdictSMIProcessesWithoutNames: a compute-apps log without a
// process_name column (--query-compute-apps=timestamp,pid,used_memory)
// names processes by pid alone, never "pid 583 ()" or "pid 560 (?)". The
// shared recording with that column dropped.
func TestVerdictSMIProcessesWithoutNames(t *testing.T) {
	dir := memtest.Testdata("smi", "per_process", "shared")
	raw, err := os.ReadFile(filepath.Join(dir, "compute_apps.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Split(l, ", ")
		b.WriteString(strings.Join(slices.Delete(f, 2, 3), ", ") + "\n") // timestamp, pid, [process_name], used, uuid, bus
	}
	if !strings.HasPrefix(b.String(), "timestamp, pid, used_gpu_memory") {
		t.Fatalf("header %q", strings.SplitN(b.String(), "\n", 2)[0])
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "compute_apps.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	gpu, err := os.ReadFile(filepath.Join(dir, "nvidia_smi.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "nvidia_smi.csv"), gpu, 0o644); err != nil {
		t.Fatal(err)
	}
	in := loadSMIDir(t, tmp, "compute_apps.csv", "nvidia_smi.csv")
	vs := judgeAll(in)
	if len(vs) != 1 || vs[0].GPU == nil {
		t.Fatalf("verdicts %+v", vs)
	}
	text := vs[0].GPU.Processes
	for _, f := range Run(Builtin(), in[0]) {
		text += "\n" + f.Title + "\n" + f.Detail
	}
	if !strings.Contains(text, "holds ") {
		t.Errorf("no zombie finding:\n%s", text)
	}
	if !strings.Contains(vs[0].GPU.Processes, "zombie: pid ") || strings.Contains(text, "()") || strings.Contains(text, "(?)") {
		t.Errorf("processes without names:\n%s", text)
	}
}
