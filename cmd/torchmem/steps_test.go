package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func TestStepsCommandGolden(t *testing.T) {
	chdirRepoRoot(t)
	for _, name := range []string{"leak_module_cache", "resnet_train_clean"} {
		for _, format := range []string{"table", "json"} {
			out, stderr, code := torchmem(t, "steps", "--format", format, "testdata/steps/"+name+".stats_steps.jsonl")
			want := exitOK
			if name == "leak_module_cache" {
				want = exitFindings // growing: exit 1
			}
			if code != want || stderr != "" {
				t.Fatalf("%s %s: exit %d, stderr %q", name, format, code, stderr)
			}
			checkGolden(t, "testdata/steps/"+name+".steps."+format+".golden", out)
		}
	}
}

// TestStepsCommandJSONMatchesTruth: the JSON bytes_per_step is the
// planted leak of truth.json, as an exact integer.
func TestStepsCommandJSONMatchesTruth(t *testing.T) {
	chdirRepoRoot(t)
	var truth struct {
		LeakBytesPerStep int64 `json:"leak_bytes_per_step"`
	}
	b, err := os.ReadFile("testdata/steps/leak_module_cache.truth.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &truth); err != nil || truth.LeakBytesPerStep == 0 {
		t.Fatalf("truth: %v %+v", err, truth)
	}
	out, _, code := torchmem(t, "steps", "--format", "json", "testdata/steps/leak_module_cache.stats_steps.jsonl")
	if code != exitFindings {
		t.Fatalf("exit %d", code)
	}
	var rep struct {
		Series []struct {
			Verdict      string `json:"verdict"`
			BytesPerStep int64  `json:"bytes_per_step"`
		} `json:"series"`
	}
	decodeJSON(t, onlyInput(t, out), &rep)
	if len(rep.Series) != 1 || rep.Series[0].Verdict != "growing" || rep.Series[0].BytesPerStep != truth.LeakBytesPerStep {
		t.Errorf("report %+v, want growing by %d bytes per step", rep, truth.LeakBytesPerStep)
	}
}

func TestStepsCommandErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return memtest.WriteFile(t, dir, name, content) }
	good := write("good.jsonl", `{"step": 0, "allocated": 5}`+"\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"steps", write("empty.jsonl", "")}, "empty.jsonl: file is empty"},
		{[]string{"steps", write("garbage.jsonl", "not json at all\n")}, "garbage.jsonl: line 1: not a per-step memory log"},
		{[]string{"steps", write("noalloc.jsonl", `{"step": 0, "loss": 2.5}`+"\n")}, "no allocated bytes"},
		{[]string{"steps", write("bad2.jsonl", `{"step": 0, "allocated": 5}`+"\n{oops\n")}, "bad2.jsonl: line 2"},
		{[]string{"steps", "--warmup", "-1", good}, "--warmup"},
		{[]string{"steps", "--format", "csv", good}, "--format"},
	}
	for _, c := range cases {
		refused(t, c.want, c.args...)
	}
	if out, _, code := torchmem(t, "steps", good); code != exitOK || !strings.HasPrefix(out, "UNKNOWN: ") {
		t.Errorf("one step: exit %d, out %q", code, out)
	}
}
