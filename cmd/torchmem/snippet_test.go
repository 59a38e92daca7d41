package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// torchmem snippet prints the very file in examples/.
func TestSnippetPrintsTheExampleFile(t *testing.T) {
	out, _, code := torchmem(t, "snippet")
	want, err := os.ReadFile(filepath.Join("..", "..", "examples", "torchmem_profile.py"))
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || out != string(want) {
		t.Errorf("exit %d; output differs from examples/torchmem_profile.py", code)
	}
}

// Every file the snippet wrote on a real H200 (testdata/gpu/snippet_proof:
// a training run, a DDP run, an OOM escaping the block, a run without a
// GPU) is read by torchmem, each recognized by content.
func TestTorchmemReadsEverythingTheSnippetWrote(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "gpu", "snippet_proof")
	for _, c := range []struct {
		dir   string
		kinds map[string]int
	}{
		{"gpu", map[string]int{"trace": 2, "snapshot": 1, "steps": 1}},
		{"ddp", map[string]int{"trace": 2, "snapshot": 2, "steps": 2}},
		{"oom_escape", map[string]int{"trace": 2, "snapshot": 1, "steps": 1}},
		{"no_gpu", map[string]int{"trace": 2}},
	} {
		t.Run(c.dir, func(t *testing.T) {
			out, errOut, code := torchmem(t, "analyze", filepath.Join(root, c.dir), "--format", "json")
			if code == exitBadInput {
				t.Fatalf("exit 2: %s", errOut)
			}
			var doc struct {
				Inputs []struct {
					Source string `json:"source"`
					Kind   string `json:"kind"`
				} `json:"inputs"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, in := range doc.Inputs {
				got[in.Kind]++
			}
			for k, n := range c.kinds {
				if got[k] != n {
					t.Errorf("%d %s files read, want %d (got %v)", got[k], k, n, got)
				}
			}
			// Each file through its own command too.
			entries, _ := os.ReadDir(filepath.Join(root, c.dir))
			for _, e := range entries {
				p := filepath.Join(root, c.dir, e.Name())
				for _, cmd := range [][]string{{"leaks", p}, {"frag", p}} {
					if _, errOut, code := torchmem(t, cmd...); code == exitBadInput && filepath.Ext(p) != ".jsonl" {
						t.Errorf("%v: exit 2: %s", cmd, errOut)
					}
				}
			}
		})
	}
	// The OOM that escaped the block is in both the last trace and the snapshot.
	out, _, code := torchmem(t, "check", filepath.Join(root, "oom_escape"), "--format", "json")
	var doc struct {
		Findings []struct {
			Rule string `json:"rule"`
		} `json:"findings"`
	}
	json.Unmarshal([]byte(out), &doc)
	rules := map[string]bool{}
	for _, f := range doc.Findings {
		rules[f.Rule] = true
	}
	if code != exitFindings || !rules["memory.oom"] || !rules["snapshot.oom"] {
		t.Errorf("oom_escape: exit %d, rules %v", code, rules)
	}
}
