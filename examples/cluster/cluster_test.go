// Package cluster holds the map and reduce steps of torchmem on a cluster
// (examples/cluster/*.sbatch for Slurm, *-job.yaml for Kubernetes); this
// test runs them on ranks made from a real recording.
package cluster

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/torchmem/torchmem/internal/gobin"

	"github.com/torchmem/torchmem/chrometrace/ranksynth"
)

// The Slurm array's task body, run as two tasks of the array over six
// ranks made from the recorded DDP job (rank 4 leaking), then the reduce:
// each task summarizes its shard (rank mod 2), the reduce names rank 4.
func TestSlurmArrayThenReduce(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := gobin.Torchmem(t) // the binary the scripts call
	work := t.TempDir()
	traces, sums := filepath.Join(work, "traces"), filepath.Join(work, "summaries")
	if _, err := ranksynth.Write(traces, ranksynth.DDPOneRankLeaks(filepath.Join("..", "..")), 6, 4); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(traces, "notes.txt"), []byte("not a profile"), 0o644)
	// What a rank's folder holds beside its trace (the snippet's and
	// torch's JSON files that are no profile): a task named them one by
	// one and failed with exit 2 under set -e, so the reduce never ran.
	os.MkdirAll(filepath.Join(traces, "rank4"), 0o755)
	for _, name := range []string{"memory_stats.json", "key_averages.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "gpu", "leak_hook_every_step", name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(traces, "rank4", name), b, 0o644)
	}
	run := func(script string, env []string, args ...string) (string, int) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), append(env, "TORCHMEM="+bin)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), code
	}
	for task, want := range [][]string{
		{"rank0_trace.summary.json.gz", "rank2_trace.summary.json.gz", "rank4_trace.summary.json.gz"},
		{"rank1_trace.summary.json.gz", "rank3_trace.summary.json.gz", "rank5_trace.summary.json.gz"},
	} {
		before, _ := filepath.Glob(filepath.Join(sums, "*.summary.json.gz"))
		out, code := run("summarize.sbatch", []string{"SLURM_ARRAY_TASK_ID=" + strconv.Itoa(task), "SLURM_ARRAY_TASK_COUNT=2", "SLURM_CPUS_PER_TASK=1"}, traces, sums)
		if code != 0 {
			t.Fatalf("task %d: exit %d\n%s", task, code, out)
		}
		after, _ := filepath.Glob(filepath.Join(sums, "*.summary.json.gz"))
		var got []string
		for _, p := range after {
			if !slices.Contains(before, p) {
				got = append(got, filepath.Base(p))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("task %d wrote %q, want %q\n%s", task, got, want, out)
		}
	}
	// A task past the ranks has nothing to do and succeeds.
	if out, code := run("summarize.sbatch", []string{"SLURM_ARRAY_TASK_ID=7", "SLURM_ARRAY_TASK_COUNT=8"}, traces, sums); code != 0 || !strings.Contains(out, "no inputs in this shard") {
		t.Errorf("an empty shard: exit %d\n%s", code, out)
	}

	out, code := run("reduce.sbatch", nil, sums)
	if code != 1 {
		t.Errorf("reduce: exit %d, want 1 (a leak)\n%s", code, out)
	}
	md, _ := os.ReadFile(filepath.Join(sums, "leaks.md"))
	if !strings.Contains(string(md), "rank 4 (leaks 8.00 MB per step where the others do not") {
		t.Errorf("leaks.md does not name rank 4:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(sums, "report.html")); err != nil {
		t.Error(err)
	}
	// The reduce from the summaries agrees with the traces: leaks JSON.
	cmd := exec.Command(bin, "leaks", sums, "--format", "json")
	js, _ := cmd.Output()
	var doc struct {
		CrossRank struct {
			Outliers []int64 `json:"outliers"`
		} `json:"cross_rank"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(doc.CrossRank.Outliers, []int64{4}) {
		t.Errorf("outliers %v, want [4]", doc.CrossRank.Outliers)
	}
}

// The Kubernetes manifests parse as Kubernetes YAML: Jobs of batch/v1, the
// map step Indexed with its task id from JOB_COMPLETION_INDEX and as many
// tasks as completions, both running the scripts above from the ConfigMap.
func TestKubernetesManifests(t *testing.T) {
	type container struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"env"`
	}
	type job struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int    `yaml:"completions"`
			Parallelism    int    `yaml:"parallelism"`
			Template       struct {
				Spec struct {
					RestartPolicy string      `yaml:"restartPolicy"`
					Containers    []container `yaml:"containers"`
					Volumes       []struct {
						Name      string `yaml:"name"`
						ConfigMap *struct {
							Name string `yaml:"name"`
						} `yaml:"configMap"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	read := func(path string) job {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var j job
		if err := yaml.Unmarshal(b, &j); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if j.APIVersion != "batch/v1" || j.Kind != "Job" || j.Metadata.Name == "" || j.Spec.Template.Spec.RestartPolicy != "Never" || len(j.Spec.Template.Spec.Containers) != 1 {
			t.Errorf("%s: not a batch/v1 Job with one container: %+v", path, j)
		}
		cm := false
		for _, v := range j.Spec.Template.Spec.Volumes {
			cm = cm || v.ConfigMap != nil && v.ConfigMap.Name == "torchmem-cluster"
		}
		if !cm {
			t.Errorf("%s: the scripts' ConfigMap is not mounted", path)
		}
		return j
	}
	m := read("summarize-job.yaml")
	if m.Spec.CompletionMode != "Indexed" || m.Spec.Completions < 1 || m.Spec.Parallelism < 1 {
		t.Errorf("map Job: completionMode %q, completions %d, parallelism %d", m.Spec.CompletionMode, m.Spec.Completions, m.Spec.Parallelism)
	}
	c := m.Spec.Template.Spec.Containers[0]
	body := strings.Join(c.Args, "\n")
	if !strings.Contains(body, "SLURM_ARRAY_TASK_ID=\"$JOB_COMPLETION_INDEX\"") || !strings.Contains(body, "summarize.sbatch") {
		t.Errorf("map Job does not run the task body with JOB_COMPLETION_INDEX:\n%s", body)
	}
	tasks := ""
	for _, e := range c.Env {
		if e.Name == "TASKS" {
			tasks = e.Value
		}
	}
	if tasks != strconv.Itoa(m.Spec.Completions) {
		t.Errorf("TASKS=%q, completions %d: the shards would not cover the ranks", tasks, m.Spec.Completions)
	}
	r := read("reduce-job.yaml")
	if r.Spec.CompletionMode == "Indexed" || !strings.Contains(strings.Join(r.Spec.Template.Spec.Containers[0].Args, "\n"), "reduce.sbatch") {
		t.Errorf("reduce Job: %+v", r.Spec)
	}
}
