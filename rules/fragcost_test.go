package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/frag"
)

// rewriteSteps copies a real steps log with each record changed by edit
// (first is true for the first line), into a temp dir.
func rewriteSteps(t *testing.T, src string, edit func(rec map[string]any, i int)) string {
	t.Helper()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		rec := map[string]any{}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		edit(rec, i)
		b, _ := json.Marshal(rec)
		out = append(out, string(b))
	}
	p := filepath.Join(dirOf(t, src), filepath.Base(src))
	if err := os.WriteFile(p, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tmpDirs gives each test one temp dir, so a rewritten log and the real
// files copied beside it are one run.
var tmpDirs = map[*testing.T]string{}

func dirOf(t *testing.T, _ string) string {
	if d, ok := tmpDirs[t]; ok {
		return d
	}
	d := t.TempDir()
	tmpDirs[t] = d
	return d
}

// besides copies a real file into the test's temp dir.
func beside(t *testing.T, src string) string {
	t.Helper()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dirOf(t, src), filepath.Base(src))
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func num(v any) int64 {
	n, _ := v.(json.Number).Int64()
	return n
}

// Retries are the cost: alloc_retry's 11 retries under a cap make it
// FRAGMENTED with the steps they fell in; the capacity OOM's own retry
// (torch flushes the cache once before it raises) is no fragmentation.
func TestFragCostRetries(t *testing.T) {
	v := judgeDir(t, filepath.Join(gpuData, "alloc_retry"))
	if f := v.Frag; f == nil || f.Verdict != frag.VerdictFragmented || !slices.Equal(f.Costs, []string{CostAllocRetries}) ||
		!strings.Contains(f.Cost, "11 cudaMalloc retries at steps 1-11 (each a cache flush and a synchronize)") {
		t.Errorf("alloc_retry: %+v", f)
	}
	files, _ := filepath.Glob(filepath.Join(gpuData, "oom", "*"))
	var keep []string
	for _, f := range files {
		if strings.HasSuffix(f, "snapshot.pickle") || strings.HasSuffix(f, "trace.json.gz") || strings.HasSuffix(f, "stats_steps.jsonl") {
			keep = append(keep, f)
		}
	}
	vs := judgeAll(loadInputs(t, keep...))
	if f := vs[0].Frag; f == nil || f.Verdict != frag.VerdictOK || f.AllocRetries != 0 || !strings.Contains(f.Cost, "it cost nothing: 0 cudaMalloc retries") || !strings.Contains(f.Retries, "the OOM's own") {
		t.Errorf("oom: %+v", f)
	}
}

// Reserved growing while allocated stays flat: a real healthy steps log
// with reserved raised 32 MiB a step from step 3 (allocated untouched) is
// named, with the allocator settings the log records; the log itself is not.
func TestReservedGrowthWithAllocatedFlat(t *testing.T) {
	src := filepath.Join(gpuData, "evidence/frag_fraction/run_rank0.steps.jsonl")
	if v := judgeAll(loadInputs(t, src)); v[0].Frag.ReservedGrowth != nil {
		t.Fatalf("healthy log: %+v", v[0].Frag.ReservedGrowth)
	}
	grown := rewriteSteps(t, src, func(rec map[string]any, i int) {
		if i == 0 {
			rec["alloc_conf"] = map[string]any{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128"}
		}
		if i >= 3 {
			rec["reserved_bytes.all.current"] = num(rec["reserved_bytes.all.current"]) + int64(i-2)*(32<<20)
		}
	})
	f := judgeAll(loadInputs(t, grown))[0].Frag
	if f == nil || f.Verdict != frag.VerdictFragmented || f.ReservedGrowth == nil || !slices.Contains(f.Costs, CostReservedGrowth) {
		t.Fatalf("grown: %+v", f)
	}
	g := f.ReservedGrowth
	if g.BytesPerStep != 32<<20 || !strings.Contains(g.AllocConf, "max_split_size_mb:128") || !strings.Contains(g.Advice, "193400") {
		t.Errorf("growth %+v", g)
	}
}

// The settings asked for against those in force: a real snapshot taken
// without expandable segments beside a steps log whose environment asked
// for them says the setting is not in effect; the expandable-segments run
// asked for and got them.
func TestAllocSettingsChecked(t *testing.T) {
	dir := filepath.Join(gpuData, "alloc_retry")
	snap, _ := filepath.Glob(filepath.Join(dir, "*.snapshot.pickle.gz"))
	steps, _ := filepath.Glob(filepath.Join(dir, "*.steps.jsonl"))
	asked := rewriteSteps(t, steps[0], func(rec map[string]any, i int) {
		if i == 0 {
			rec["alloc_conf"] = map[string]any{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
		}
	})
	f := judgeAll(loadInputs(t, beside(t, snap[0]), asked))[0].Frag
	if f == nil || !strings.Contains(f.Settings, "expandable_segments:True, but the snapshot says expandable_segments false: the setting asked for is not in effect") {
		t.Errorf("settings %q", f.Settings)
	}
	delete(tmpDirs, t)
	dir = filepath.Join(gpuData, "expandable_segments")
	snap, _ = filepath.Glob(filepath.Join(dir, "*.snapshot.pickle.gz"))
	steps, _ = filepath.Glob(filepath.Join(dir, "*.steps.jsonl"))
	asked = rewriteSteps(t, steps[0], func(rec map[string]any, i int) {
		if i == 0 {
			rec["alloc_conf"] = map[string]any{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
		}
	})
	if f := judgeAll(loadInputs(t, beside(t, snap[0]), asked))[0].Frag; f == nil || f.Settings != "" || f.AllocConf != "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" {
		t.Errorf("in effect, yet: %+v", f)
	}
}

// A history of as many events as its max_entries overflowed its ring
// buffer; one event fewer did not.
func TestHistoryOverflow(t *testing.T) {
	rep := &snapshot.Report{TraceEntries: map[string]int{"alloc": 50000, "free_completed": 50000}}
	if s := historyOverflow(rep, -1); !strings.Contains(s, "100000 events, TorchMemProfile's default max_entries") {
		t.Errorf("default: %q", s)
	}
	if s := historyOverflow(rep, 200000); s != "" {
		t.Errorf("under the logged limit: %q", s)
	}
	rep.TraceEntries["alloc"]--
	if s := historyOverflow(rep, -1); s != "" {
		t.Errorf("one under: %q", s)
	}
}

// The round-4 recordings of issue #40, each against its truth.json: every
// healthy run (AMP, compile, checkpointing, expandable segments on and
// off, varying lengths, ...) is never FRAGMENTED; retries under a cap and
// reserved growing while allocated is flat are, with their cost; the leak
// that ends in an OOM under a fraction names the leak in its OOM; an
// overflowing history and conflicting settings are said.
func TestFragCostOnRound4(t *testing.T) {
	r4 := filepath.Join(gpuData, "round4")
	dirs, _ := filepath.Glob(filepath.Join(r4, "*_clean"))
	if len(dirs) < 15 {
		t.Fatalf("%d healthy round-4 recordings", len(dirs))
	}
	for _, d := range dirs {
		v := judgeDir(t, d)
		if v.Frag != nil && v.Frag.Verdict == frag.VerdictFragmented {
			t.Errorf("%s: healthy, yet FRAGMENTED: %s", filepath.Base(d), v.Frag.Cost)
		}
	}
	for _, c := range []struct {
		dir, cost, text string
	}{
		{"retries_under_cap", CostAllocRetries, "29 cudaMalloc retries at steps 1-29 (each a cache flush and a synchronize)"},
		{"reserved_growth_flat_allocated", CostReservedGrowth, "while allocated changed 0 B"},
	} {
		v := judgeDir(t, filepath.Join(r4, c.dir))
		if f := v.Frag; f == nil || f.Verdict != frag.VerdictFragmented || !slices.Contains(f.Costs, c.cost) || !strings.Contains(f.Cost, c.text) {
			t.Errorf("%s: %+v", c.dir, v.Frag)
		}
	}
	v := judgeDir(t, filepath.Join(r4, "leak_to_oom_fraction"))
	if len(v.OOMs) != 1 || v.OOMs[0].Cause != OOMProcessLimit || !strings.Contains(v.OOMs[0].FilledBy, "the leak at round4_cases.py:526 (128.00 MB/step since step") ||
		v.Leak.Forecast != nil {
		t.Errorf("leak_to_oom_fraction: %+v; leak forecast %+v", v.OOMs, v.Leak.Forecast)
	}
	if v := judgeDir(t, filepath.Join(r4, "history_overflow")); v.Frag == nil || !strings.Contains(v.Frag.Settings, "3000 events") {
		t.Errorf("history_overflow: %+v", v.Frag)
	}
	if v := judgeDir(t, filepath.Join(r4, "alloc_conf_conflict")); v.Frag == nil || !strings.Contains(v.Frag.Settings, "only one of them is in effect") {
		t.Errorf("alloc_conf_conflict: %+v", v.Frag)
	}
}

// Time to OOM: a real leaking steps log (staircase_p2) given the limit
// the snippet now records forecasts the steps left at the leak's rate to
// the limit minus the last reserved, and the time at the log's median step
// time; without a limit or capacity anywhere there is no forecast, and a
// leak with a trace is forecast against the device's capacity, saying
// the fraction is not recorded.
func TestLeakForecast(t *testing.T) {
	src := filepath.Join(gpuData, "round4", "staircase_p2", "run_rank0.steps.jsonl")
	if v := judgeAll(loadInputs(t, src))[0]; v.Leak.Verdict != "leak" || v.Leak.Forecast != nil {
		t.Fatalf("no limit recorded: %s, forecast %+v", v.Leak.Verdict, v.Leak.Forecast)
	}
	const capacity = 150109880320
	var lastReserved int64
	logged := rewriteSteps(t, src, func(rec map[string]any, i int) {
		if i == 0 {
			rec["total_memory"], rec["memory_fraction"] = capacity, 0.5
		}
		lastReserved = num(rec["reserved_bytes.all.current"])
	})
	v := judgeAll(loadInputs(t, logged))[0]
	fc := v.Leak.Forecast
	if fc == nil {
		t.Fatalf("no forecast: %+v", v.Leak)
	}
	limit := int64(capacity / 2)
	want := (limit - lastReserved + v.Leak.BytesPerStep - 1) / v.Leak.BytesPerStep
	if fc.LimitBytes != limit || fc.HeadroomBytes != limit-lastReserved || fc.Steps != want || fc.SecPerStep <= 0 ||
		!strings.Contains(fc.Text, "the process's 69.90 GB limit fills in ~") || !strings.Contains(fc.Text, "s/step") {
		t.Errorf("forecast %+v, want %d steps", fc, want)
	}
	v = judgeDir(t, filepath.Join(gpuData, "small_leak_big_model"))
	if fc := v.Leak.Forecast; fc == nil || !strings.Contains(fc.Text, "at 512.00 KB/step, the 139.80 GB device fills in ~") || !strings.Contains(fc.Text, "memory fraction is not recorded") {
		t.Errorf("with a trace: %+v", fc)
	}
}
