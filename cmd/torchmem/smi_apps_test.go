package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// TestSMIPerProcess: torchmem smi on a run's folder reads the compute-apps
// log beside the GPU log; the shared run's holder is named a zombie (exit
// 1), the healthy run has none (exit 0).
func TestSMIPerProcess(t *testing.T) {
	chdirRepoRoot(t)
	var truth struct {
		Holder struct {
			PID int64 `json:"pid"`
		} `json:"holder"`
	}
	memtest.ReadJSON(t, "testdata/smi/per_process/shared/truth.json", &truth)
	out, _, code := torchmem(t, "smi", "testdata/smi/per_process/shared")
	if code != exitOK {
		t.Errorf("shared: exit %d, want 0: the zombie is smi.zombie's warning, as in check", code)
	}
	row := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "│ "+strconv.FormatInt(truth.Holder.PID, 10)+" ") {
			row = l
		}
	}
	if !strings.Contains(row, "ZOMBIE") || !strings.Contains(out, "Shared GPU 0") || !strings.Contains(out, "3 processes at once") {
		t.Errorf("shared: holder row %q\n%s", row, out)
	}
	out, _, code = torchmem(t, "smi", "testdata/smi/per_process/healthy")
	if code != 0 || strings.Contains(out, "ZOMBIE") || !strings.Contains(out, "per-process log, 1 process,") {
		t.Errorf("healthy: exit %d\n%s", code, out)
	}
}

// TestAnalyzeSMIAgainstTorch: analyze on a run's folder (GPU log,
// compute-apps log, steps log) answers "which number do I believe" to the
// MiB, and claims no leak from the healthy run's smi log; an smi log alone
// gives its leak as a rate, never "0 B per step".
func TestAnalyzeSMIAgainstTorch(t *testing.T) {
	chdirRepoRoot(t)
	out, _, code := torchmem(t, "analyze", "--format", "json", "testdata/smi/per_process/healthy")
	if code != 0 {
		t.Errorf("healthy: exit %d", code)
	}
	var rep struct {
		Verdicts []struct {
			Leak struct {
				Verdict  string `json:"verdict"`
				Evidence []struct {
					Kind    string `json:"input"`
					Verdict string `json:"verdict"`
				} `json:"evidence"`
			} `json:"leak"`
			GPU *struct {
				Split      string `json:"split"`
				Reconciled struct {
					Gap      int64 `json:"gap_bytes"`
					Constant bool  `json:"constant"`
					TorchPID int64 `json:"torch_pid"`
				} `json:"reconciled"`
			} `json:"gpu"`
		} `json:"verdicts"`
		Inputs []struct {
			Findings []struct {
				Rule string `json:"rule"`
			} `json:"findings"`
		} `json:"inputs"`
	}
	decodeJSON(t, out, &rep)
	if len(rep.Verdicts) != 1 || rep.Verdicts[0].GPU == nil {
		t.Fatalf("verdicts %+v", rep.Verdicts)
	}
	v := rep.Verdicts[0]
	if g := v.GPU.Reconciled; g.Gap != 751<<20 || !g.Constant || g.TorchPID < 0 {
		t.Errorf("reconciled %+v, want a constant 751 MiB", g)
	}
	if v.Leak.Verdict != "clean" {
		t.Errorf("healthy: leak verdict %s", v.Leak.Verdict)
	}
	for _, e := range v.Leak.Evidence {
		if e.Kind == "nvidia-smi" && e.Verdict != "clean" {
			t.Errorf("healthy: nvidia-smi evidence %s", e.Verdict)
		}
	}
	for _, in := range rep.Inputs {
		for _, f := range in.Findings {
			if f.Rule == "smi.leak" || f.Rule == "smi.zombie" {
				t.Errorf("healthy: finding %s", f.Rule)
			}
		}
	}
	out, _, _ = torchmem(t, "analyze", "testdata/smi/nvidia_smi_leak.csv")
	if head := strings.SplitN(out, "== Checklist", 2)[0]; !strings.Contains(head, "MiB/s") || strings.Contains(out, "0 B per step") {
		t.Errorf("smi leak alone:\n%s", head)
	}
}

// TestSMIPerProcessGoldens: the JSON of smi on the shared run's folder
// (the per-process document beside the GPU log's) and of analyze on it
// (the verdict's gpu entry); TestJSONDocumented checks their fields
// against JSON.md.
func TestSMIPerProcessGoldens(t *testing.T) {
	chdirRepoRoot(t)
	out, _, code := torchmem(t, "smi", "--format", "json", "testdata/smi/per_process/shared/compute_apps.csv", "testdata/smi/per_process/shared/nvidia_smi.csv")
	if code != exitOK {
		t.Errorf("smi: exit %d, want 0 (a zombie is a warning)", code)
	}
	checkGolden(t, "testdata/smi/per_process_shared.smi.json.golden", out)
	out, _, _ = torchmem(t, "analyze", "--format", "json", "testdata/smi/per_process/shared")
	checkGolden(t, "testdata/smi/per_process_shared.analyze.json.golden", out)
}
