package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/leak"
)

// evidenceTruth is what a recording's truth.json says was planted.
type evidenceTruth struct {
	Leak *struct {
		Kind         string `json:"kind"`
		BytesPerStep int64  `json:"bytes_per_step"`
		BytesPerJump int64  `json:"bytes_per_jump"`
		PeriodSteps  int64  `json:"period_steps"`
		Site         *struct {
			File string `json:"file"`
			Line int    `json:"line"`
		} `json:"site"`
	} `json:"leak"`
}

// judgeDir is the one verdict over every input of a recording folder.
func judgeDir(t *testing.T, dir string) Verdict {
	t.Helper()
	var paths []string
	for _, pat := range []string{"*.pt.trace.json.gz", "*.snapshot.pickle.gz", "*.steps.jsonl"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		paths = append(paths, m...)
	}
	vs := judgeAll(loadInputs(t, paths...))
	if len(vs) != 1 {
		t.Fatalf("%s: %d verdicts, want 1", dir, len(vs))
	}
	return vs[0]
}

// The sources of one run are weighed on the steps each covers: a window
// that sees a queue or cache filling up is outweighed by the run's log
// that levels off, and the disagreement is said; a leak's figure names
// its own steps and period; a snapshot without ProfilerStep annotations
// is cut into steps by the step log's clock and gives the line.
func TestEvidenceWeighing(t *testing.T) {
	for _, c := range []struct {
		dir     string
		verdict string
		from    string // in LeakAnswer.From
		agree   string // in LeakAnswer.Agreement
	}{
		{"evidence/bounded_queue_cap", leak.VerdictClean, "outweighs", "the trace keeps"},
		{"evidence/seqlen_cache", leak.VerdictClean, "outweighs", "measured a plateau after the growth"},
		{"late_start_leak", leak.VerdictLeak, "grows every step over steps 6..11", "agree"},
		{"evidence/periodic_eval", leak.VerdictLeak, "grows 8.00 MB every 5 steps over steps 4..29", "the snapshot 1.60 MB/step"},
		{"evidence/trace_off_leak", leak.VerdictLeak, "the step log", "the snapshot 256.00 KB/step"},
		{"grad_accum", leak.VerdictClean, "the step log", "all agree"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join(gpuData, c.dir)
			v := judgeDir(t, dir)
			a := v.Leak
			if a.Verdict != c.verdict || !strings.Contains(a.From, c.from) || !strings.Contains(a.Agreement, c.agree) {
				t.Fatalf("verdict %s from %q, agreement %q; want %s from %q, agreement with %q", a.Verdict, a.From, a.Agreement, c.verdict, c.from, c.agree)
			}
			var truth evidenceTruth
			memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
			if c.verdict != leak.VerdictLeak || truth.Leak == nil {
				return
			}
			want := truth.Leak.BytesPerStep
			if truth.Leak.PeriodSteps > 1 {
				want = truth.Leak.BytesPerJump / truth.Leak.PeriodSteps
			}
			if d := a.BytesPerStep - want; d > 1 || d < -1 { // jump / period, rounded
				t.Errorf("%d B/step, planted %d", a.BytesPerStep, want)
			}
			if s := truth.Leak.Site; s != nil && (a.Location == nil || a.Location.Line != s.Line || filepath.Base(a.Location.File) != s.File) {
				t.Errorf("location %v, planted %s:%d", a.Location, s.File, s.Line)
			}
		})
	}
}

// Fragmentation said by what it cost: a memory-fraction run whose split
// free space peaked mid-run (436 MB, 57% of reserved, steps 5..14) with no
// retry and no OOM cost nothing the files can show (its limit is not in
// them): OK with the figure. The same steps log with the limit recorded
// (the snippet's first line now carries total_memory and memory_fraction;
// here the run's own cap from truth.json) shows reserved within 125 MiB of
// the cap while 437 MiB sat split: fragmented, with that cost. The same
// run with expandable segments has no split at all.
func TestFragOverTheRun(t *testing.T) {
	for _, c := range []struct {
		dir, verdict, cost string
	}{
		{"evidence/frag_fraction", "ok", "436.96 MB split inside used segments at the worst step (step 5); it cost nothing: 0 cudaMalloc retries"},
		{"evidence/frag_fraction_expandable", "ok", "0 B split"},
	} {
		v := judgeDir(t, filepath.Join(gpuData, c.dir))
		if v.Frag == nil || v.Frag.Verdict != c.verdict || !strings.Contains(v.Frag.Cost, c.cost) || strings.Contains(v.Frag.Reason, "wasted") {
			t.Errorf("%s: frag %+v, want %s (%q)", c.dir, v.Frag, c.verdict, c.cost)
		}
	}
	dir := filepath.Join(gpuData, "evidence/frag_fraction")
	var truth struct {
		Cap int64 `json:"cap_bytes"`
	}
	memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
	const capacity = 150109880320 // the H200's total_memory (the trace's device properties)
	raw, err := os.ReadFile(filepath.Join(dir, "run_rank0.steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(raw), "\n")
	first = strings.TrimSuffix(first, "}") + fmt.Sprintf(", \"total_memory\": %d, \"memory_fraction\": %.6f}", int64(capacity), float64(truth.Cap)/capacity)
	logged := filepath.Join(t.TempDir(), "run_rank0.steps.jsonl")
	if err := os.WriteFile(logged, []byte(first+"\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	vs := judgeAll(loadInputs(t, logged))
	f := vs[0].Frag
	if f == nil || f.Verdict != "fragmented" || !slices.Contains(f.Costs, CostSplitOverHeadroom) || !strings.Contains(f.Cost, "at step 5 reserved") {
		t.Errorf("with the limit logged: frag %+v, want fragmented by split over the headroom at step 5", f)
	}
}

// The line, the kind and the OOM cause as far as each run's data tells:
// generated code is context (the user's call, said to be inside a compiled
// region); a kept KV cache under inference_mode is no autograd graph; a
// hook registered every step on the module that makes the memory is kind
// hook, registered once a container; an OOM under a memory fraction is the
// process's limit.
func TestEvidenceLinesAndKinds(t *testing.T) {
	for _, c := range []struct {
		dir      string
		kind     string // "" any
		notKind  string
		line     int // the allocating line (truth.json), 0 unchecked
		holding  string
		oomCause string
		evidence string // in the kind's evidence
	}{
		{dir: "evidence/compiled_keeps_logits", kind: leak.KindContainer, line: 43, holding: "torchinductor_"},
		{dir: "evidence/inference_kv_cache", notKind: leak.KindAutogradGraph, line: 68},
		{dir: "evidence/hook_every_step", kind: leak.KindHook},
		{dir: "evidence/hook_once", kind: leak.KindContainer, evidence: "keep_output, called with it every step"},
		{dir: "evidence/oom_fraction", oomCause: OOMProcessLimit},
	} {
		t.Run(c.dir, func(t *testing.T) {
			v := judgeDir(t, filepath.Join(gpuData, c.dir))
			a := v.Leak
			if a.Verdict != leak.VerdictLeak {
				t.Fatalf("verdict %s (%s)", a.Verdict, a.Reason)
			}
			if (c.kind != "" && a.Kind != c.kind) || (c.notKind != "" && a.Kind == c.notKind) {
				t.Errorf("kind %s (%s), want %q, not %q", a.Kind, a.KindEvidence, c.kind, c.notKind)
			}
			if c.line > 0 && (a.Location == nil || a.Location.Line != c.line || a.Location.File != "evidence_cases.py" && !strings.HasSuffix(a.Location.File, "/evidence_cases.py")) {
				t.Errorf("location %+v, want evidence_cases.py:%d", a.Location, c.line)
			}
			if !strings.Contains(a.KindEvidence, c.evidence) {
				t.Errorf("kind evidence %q lacks %q", a.KindEvidence, c.evidence)
			}
			if c.holding != "" && !strings.Contains(strings.Join(a.Holding, " > "), c.holding) {
				t.Errorf("holding chain %v lacks %q", a.Holding, c.holding)
			}
			if c.oomCause != "" && (len(v.OOMs) == 0 || v.OOMs[0].Cause != c.oomCause) {
				t.Errorf("ooms %+v, want cause %s", v.OOMs, c.oomCause)
			}
		})
	}
}
