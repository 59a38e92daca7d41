package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// chdirRepoRoot makes paths in outputs and goldens repository-relative.
func chdirRepoRoot(t *testing.T) {
	t.Helper()
	t.Chdir(filepath.Join("..", ".."))
}

func TestSMICommandGolden(t *testing.T) {
	chdirRepoRoot(t)
	const log = "testdata/smi/nvidia_smi_leak.csv"
	for _, format := range []string{"table", "json"} {
		out, stderr, code := torchmem(t, "smi", "--format", format, log)
		// The log holds a leak: exit 1, like leaks and frag.
		if code != exitFindings || stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q", format, code, stderr)
		}
		checkGolden(t, "testdata/smi/nvidia_smi_leak.smi."+format+".golden", out)
	}
}

func TestSMICommandJSON(t *testing.T) {
	chdirRepoRoot(t)
	out, _, code := torchmem(t, "smi", "--format", "json", "--gpu", "0", "testdata/smi/nvidia_smi_leak.csv")
	if code != exitFindings {
		t.Fatalf("exit %d", code)
	}
	dec := json.NewDecoder(strings.NewReader(onlyInput(t, out)))
	dec.UseNumber()
	var rep struct {
		GPUs []struct {
			TotalBytes json.Number `json:"total_bytes"`
			Leaks      []struct {
				StartBytes  json.Number `json:"start_bytes"`
				EndBytes    json.Number `json:"end_bytes"`
				GrowthBytes json.Number `json:"growth_bytes"`
				SlopeMiB    float64     `json:"slope_mib_per_s"`
			} `json:"leaks"`
		} `json:"gpus"`
	}
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 1 || len(rep.GPUs[0].Leaks) != 1 {
		t.Fatalf("report %+v, want one GPU with one leak", rep)
	}
	l := rep.GPUs[0].Leaks[0]
	for _, n := range []json.Number{rep.GPUs[0].TotalBytes, l.StartBytes, l.EndBytes, l.GrowthBytes} {
		if strings.ContainsAny(string(n), ".eE") {
			t.Errorf("byte count %s is not an exact integer", n)
		}
	}
	s, _ := l.StartBytes.Int64()
	e, _ := l.EndBytes.Int64()
	g, _ := l.GrowthBytes.Int64()
	if g != e-s || g%(1<<20) != 0 {
		t.Errorf("growth %d, end-start %d; nvidia-smi counts whole MiB", g, e-s)
	}
	if l.SlopeMiB < 230 || l.SlopeMiB > 280 {
		t.Errorf("slope %.1f MiB/s; the process grew 64 MiB every 0.25 s", l.SlopeMiB)
	}
}

func TestSMICommandErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return memtest.WriteFile(t, dir, name, content) }
	empty := write("empty.csv", "")
	garbage := write("garbage.csv", "this is, not a log\n")
	good := write("good.csv", "index, timestamp, memory.used [MiB]\n0, 2026/11/29 17:26:22.516, 5 MiB\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"smi", empty}, "empty.csv: file is empty"},
		{[]string{"smi", garbage}, "garbage.csv: not an nvidia-smi"},
		{[]string{"smi", filepath.Join(dir, "missing.csv")}, "missing.csv"},
		{[]string{"smi", "--gpu", "3", good}, `no GPU "3" in the log (it has 0)`},
		{[]string{"smi", "--threshold", "1.5", good}, "--threshold"},
		{[]string{"smi", "--min-growth-duration", "0s", good}, "--min-growth-duration"},
		{[]string{"smi", "--format", "xml", good}, "--format"},
	}
	for _, c := range cases {
		refused(t, c.want, c.args...)
	}
	if out, stderr, code := torchmem(t, "smi", good); code != exitOK || !strings.Contains(out, "CLEAN: ") {
		t.Errorf("one-sample log: exit %d, stderr %q, out %q", code, stderr, out)
	}
}

// TestSMICommandTruncatedWarns: a log cut mid-row is read, with a warning
// naming the file on stderr.
func TestSMICommandTruncatedWarns(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cut.csv")
	os.WriteFile(p, []byte("index, timestamp, memory.used [MiB]\n0, 2026/11/29 17:26:22.516, 5 MiB\n0, 2026/11/29 17:2"), 0o644)
	_, stderr, code := torchmem(t, "smi", p)
	if code != exitOK || !strings.Contains(stderr, "warning: "+p+": line 3") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestSMICommandGzipped: logs are often compressed when kept; the content,
// not the name, decides.
func TestSMICommandGzipped(t *testing.T) {
	raw, err := os.ReadFile(memtest.Testdata("smi", "nvidia_smi_leak.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	p := filepath.Join(t.TempDir(), "smi.csv")
	if err := os.WriteFile(p, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := torchmem(t, "smi", p)
	if code != exitFindings || !strings.Contains(out, "LEAK: ") {
		t.Errorf("exit %d, stderr %q, out:\n%s", code, stderr, out)
	}
}
