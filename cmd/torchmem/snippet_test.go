package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/memtest"
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
	t.Parallel() // see torchmem: which tests may run side by side
	root := memtest.Testdata("gpu", "snippet_proof")
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
			decodeJSON(t, out, &doc)
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
	// The OOM that escaped the block is in both the last trace and the
	// snapshot: one error, one finding.
	out, _, code := torchmem(t, "check", filepath.Join(root, "oom_escape"), "--format", "json")
	var doc struct {
		Findings []struct {
			Rule string `json:"rule"`
		} `json:"findings"`
	}
	decodeJSON(t, out, &doc)
	rules := map[string]bool{}
	for _, f := range doc.Findings {
		rules[f.Rule] = true
	}
	if code != exitFindings || rules["memory.oom"] == rules["snapshot.oom"] {
		t.Errorf("oom_escape: exit %d, rules %v", code, rules)
	}
}

// Every recording made with snippet v2 (testdata/gpu/*/truth.json naming
// "snippet v2") is read by every command that takes its files: the trace by
// analyze, ops, stacks, leaks, frag and check; the gzipped snapshot by
// snapshot, leaks and frag; the steps log by steps. No verdicts here: those
// belong to the tests of each analysis.
func TestTorchmemReadsEverySnippetV2Recording(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	root := memtest.Testdata("gpu")
	truths, err := filepath.Glob(filepath.Join(root, "*", "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, truthPath := range truths {
		raw, err := os.ReadFile(truthPath)
		if err != nil {
			t.Fatal(err)
		}
		var truth struct {
			RecordedWith string   `json:"recorded_with"`
			Steps        int      `json:"steps"`
			Files        []string `json:"files"`
		}
		if err := json.Unmarshal(raw, &truth); err != nil {
			t.Fatalf("%s: %v", truthPath, err)
		}
		if !strings.Contains(truth.RecordedWith, "snippet v2") {
			continue
		}
		seen++
		dir := filepath.Dir(truthPath)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			byKind := map[string][]string{}
			for _, name := range truth.Files {
				p := filepath.Join(dir, name)
				if _, err := os.Stat(p); err != nil {
					t.Fatalf("truth.json lists %s: %v", name, err)
				}
				switch {
				case strings.HasSuffix(name, ".pt.trace.json.gz"):
					byKind["trace"] = append(byKind["trace"], p)
				case strings.HasSuffix(name, ".snapshot.pickle.gz"):
					byKind["snapshot"] = append(byKind["snapshot"], p)
				case strings.HasSuffix(name, ".steps.jsonl"):
					byKind["steps"] = append(byKind["steps"], p)
				default:
					t.Errorf("unexpected file %s", name)
				}
			}
			for _, k := range []string{"trace", "snapshot", "steps"} {
				if len(byKind[k]) != 1 {
					t.Fatalf("%d %s files, want 1: %v", len(byKind[k]), k, truth.Files)
				}
			}
			// In the folder's order: TestFolderEqualsItsFiles asks analyze
			// the same of the same files, and the evaluation is shared.
			all := append(append(append([]string{}, byKind["trace"]...), byKind["snapshot"]...), byKind["steps"]...)
			slices.Sort(all)
			out, errOut, code := torchmemShared(t, append([]string{"analyze", "--format", "json"}, all...)...)
			if code == exitBadInput {
				t.Fatalf("analyze: exit 2: %s", errOut)
			}
			var doc struct {
				Inputs []struct {
					Kind string `json:"kind"`
				} `json:"inputs"`
			}
			decodeJSON(t, out, &doc)
			got := map[string]int{}
			for _, in := range doc.Inputs {
				got[in.Kind]++
			}
			if got["trace"] != 1 || got["snapshot"] != 1 || got["steps"] != 1 {
				t.Errorf("analyze read %v, want one trace, one snapshot, one steps log", got)
			}
			// The folder as the snippet leaves it (with truth.json, memory_stats.json and,
			// in logged_memory_summary, the training logs beside the files).
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			out, errOut, code = torchmemShared(t, "analyze", "--format", "json", dir) // as TestEveryCommandAgrees asks
			if code == exitBadInput {
				t.Fatalf("analyze %s: exit 2: %s", dir, errOut)
			}
			doc.Inputs = nil
			decodeJSON(t, out, &doc)
			got = map[string]int{}
			for _, in := range doc.Inputs {
				got[in.Kind]++
			}
			if got["trace"] != 1 || got["snapshot"] != 1 || got["steps"] != 1 || got["memory-summary"] != len(logs) {
				t.Errorf("analyze %s read %v, want one trace, snapshot and steps log and %d memory_summary logs", dir, got, len(logs))
			}
			for _, cmd := range [][]string{
				{"ops", byKind["trace"][0]}, {"stacks", byKind["trace"][0]}, {"leaks", byKind["trace"][0]},
				{"frag", byKind["trace"][0]},
				{"snapshot", byKind["snapshot"][0]}, {"leaks", byKind["snapshot"][0]}, {"frag", byKind["snapshot"][0]},
				{"steps", byKind["steps"][0]},
			} {
				if _, errOut, code := torchmem(t, cmd...); code == exitBadInput {
					t.Errorf("%s %s: exit 2: %s", cmd[0], filepath.Base(cmd[1]), errOut)
				}
			}
			// check reads the trace and the snapshot together: the folder,
			// as TestEveryCommandAgrees asks (its evaluation shared), with
			// both among the sources of its verdict.
			out, errOut, code = torchmemShared(t, "check", "--format", "json", dir)
			var checked struct {
				Verdicts []struct {
					Sources []string `json:"sources"`
				} `json:"verdicts"`
			}
			decodeJSON(t, out, &checked)
			if code == exitBadInput || len(checked.Verdicts) != 1 ||
				!slices.Contains(checked.Verdicts[0].Sources, byKind["trace"][0]) || !slices.Contains(checked.Verdicts[0].Sources, byKind["snapshot"][0]) {
				t.Errorf("check %s: exit %d, verdicts %+v, want one from its trace and its snapshot: %s", dir, code, checked.Verdicts, errOut)
			}
			// One steps-log line per step(): the log is whole.
			lines, err := os.ReadFile(byKind["steps"][0])
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(lines), "\n"); n != truth.Steps {
				t.Errorf("steps log has %d lines, truth.json says %d steps", n, truth.Steps)
			}
		})
	}
	if seen < 12 {
		t.Errorf("%d snippet-v2 recordings found under %s, want at least 12", seen, root)
	}
}

// snippetV2Name is how snippet v2 names its files: a run id (host, pid,
// start time), the rank, and the kind.
var snippetV2Name = regexp.MustCompile(`^([A-Za-z0-9.-]+_\d+_\d{8}-\d{6}(?:-\d+)?)_rank(\d+)(_step\d+\.pt\.trace\.json\.gz|\.snapshot\.pickle\.gz|\.steps\.jsonl)$`)

// What snippet v2 wrote on the H200 (testdata/gpu/snippet_v2): a rerun into
// the same folder overwrites nothing, a rank left out of TORCHMEM_RANKS
// writes its steps log only, a picked rank everything, and every file is
// named by run and rank and read by torchmem.
func TestSnippetV2Files(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	root := memtest.Testdata("gpu", "snippet_v2")
	runsIn := func(t *testing.T, dir string) (map[string][]string, map[string]bool) {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		runs, ranks := map[string][]string{}, map[string]bool{}
		for _, e := range entries {
			m := snippetV2Name.FindStringSubmatch(e.Name())
			if m == nil {
				t.Errorf("%s/%s: not a snippet-v2 name", dir, e.Name())
				continue
			}
			runs[m[1]] = append(runs[m[1]], m[3])
			ranks[m[2]] = true
		}
		return runs, ranks
	}
	t.Run("rerun", func(t *testing.T) {
		runs, _ := runsIn(t, "rerun")
		if len(runs) != 2 {
			t.Fatalf("%d runs, want 2: %v", len(runs), runs)
		}
		for run, kinds := range runs {
			if len(kinds) != 3 {
				t.Errorf("run %s kept %v, want a trace, a snapshot and a steps log", run, kinds)
			}
		}
	})
	t.Run("rank_not_picked", func(t *testing.T) {
		runs, ranks := runsIn(t, "rank_not_picked")
		for _, kinds := range runs {
			if len(kinds) != 1 || kinds[0] != ".steps.jsonl" || !ranks["3"] {
				t.Errorf("rank 3 outside TORCHMEM_RANKS=0,7 wrote %v (ranks %v), want its steps log only", kinds, ranks)
			}
		}
	})
	t.Run("rank_picked", func(t *testing.T) {
		runs, ranks := runsIn(t, "rank_picked")
		for _, kinds := range runs {
			if len(kinds) != 3 || !ranks["7"] {
				t.Errorf("rank 7 in TORCHMEM_RANKS=0,7 wrote %v (ranks %v), want 3 files", kinds, ranks)
			}
		}
	})
	for _, dir := range []string{"gpu", "oom_escape", "rerun", "rank_picked", "rank_not_picked", "cpp_stacks"} {
		t.Run("read/"+dir, func(t *testing.T) {
			runsIn(t, dir)
			entries, _ := os.ReadDir(filepath.Join(root, dir))
			for _, e := range entries {
				p := filepath.Join(root, dir, e.Name())
				cmds := [][]string{{"analyze", p}}
				switch {
				case strings.HasSuffix(p, ".snapshot.pickle.gz"):
					cmds = append(cmds, []string{"snapshot", p}, []string{"frag", p}, []string{"leaks", p})
				case strings.HasSuffix(p, ".steps.jsonl"):
					cmds = append(cmds, []string{"steps", p})
				default:
					cmds = append(cmds, []string{"leaks", p}, []string{"frag", p})
				}
				for _, cmd := range cmds {
					if _, errOut, code := torchmem(t, cmd...); code == exitBadInput {
						t.Errorf("%s %s: exit 2: %s", cmd[0], e.Name(), errOut)
					}
				}
			}
		})
	}
}

// The snippet detaches CUPTI after its last cycle (testdata/gpu/snippet_v3,
// recorded on the H200 by examples/record/teardown_exits.sh: every way a run
// ends, each under a time limit). A teardown that raced with a later cycle
// would leave that cycle without GPU events; a hang would leave the process
// killed (rc 124) with its files unwritten. Every folder is read by analyze
// with the exit its run calls for, and every cycle's trace has its kernels.
func TestSnippetTeardownExits(t *testing.T) {
	root := memtest.Testdata("gpu", "snippet_v3")
	summary, err := os.ReadFile(filepath.Join(root, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	caseLine := regexp.MustCompile(`(?m)^== (\S+) rc=(\d+) `)
	cases := caseLine.FindAllStringSubmatch(string(summary), -1)
	if len(cases) < 10 {
		t.Fatalf("%d cases in summary.txt, want 10", len(cases))
	}
	for _, c := range cases {
		name, rc := c[1], c[2]
		t.Run(name, func(t *testing.T) {
			if rc == "124" {
				t.Fatalf("the run hung (killed at its time limit)")
			}
			dir := filepath.Join(root, name)
			wantExit := 0 // train_small and the probes are clean runs
			if strings.HasPrefix(name, "oom_") {
				wantExit = 1 // the OOM is found
			}
			if _, errOut, code := torchmem(t, "analyze", dir); code != wantExit {
				t.Errorf("analyze %s: exit %d, want %d: %s", name, code, wantExit, errOut)
			}
			traces, _ := filepath.Glob(filepath.Join(dir, "*.pt.trace.json.gz"))
			if len(traces) == 0 {
				t.Fatalf("no trace written")
			}
			total := 0
			for _, p := range traces {
				tr := memtest.Trace(t, p)
				launches, kernels := 0, 0
				for _, op := range tr.HostOps {
					if op.Cat == chrometrace.CatCUDARuntime && strings.Contains(tr.Str(op.Name), "LaunchKernel") {
						launches++
					}
				}
				for _, op := range tr.DeviceOps {
					if op.Cat == chrometrace.CatKernel {
						kernels++
					}
				}
				// A cycle cut short by the block's end may hold no work at all.
				if launches > 0 && kernels == 0 {
					t.Errorf("%s: %d kernel launches, no GPU kernels: CUPTI was gone during this cycle", filepath.Base(p), launches)
				}
				total += launches
			}
			if total == 0 {
				t.Errorf("no kernel launches in any trace")
			}
		})
	}
}
