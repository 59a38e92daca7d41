package rules

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/site"
)

var timelineRuleIDs = []string{ruleSyncCopy, rulePageableH2D, rulePinnedBlocking, ruleIdleGaps, ruleLaunchBound, ruleLowMemcpyBW}

func TestTimelineRulesRegistered(t *testing.T) {
	byID := map[string]Rule{}
	for _, r := range Builtin() {
		byID[r.ID] = r
	}
	for _, id := range timelineRuleIDs {
		r, ok := byID[id]
		if !ok {
			t.Errorf("%s is not registered", id)
			continue
		}
		if r.Description == "" || r.Unit == "" || r.Threshold <= 0 || r.Check == nil {
			t.Errorf("%s: incomplete rule %+v", id, r)
		}
	}
}

func findingsOf(t testing.TB, tr *chrometrace.Trace, id string) []Finding {
	t.Helper()
	return Run([]Rule{ruleNamed(t, id)}, &Input{Source: "test", Trace: tr})
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

// ---- real traces

type timelineCase struct {
	name string
	path string
	// which rules must fire; the others must stay silent.
	fires map[string]bool
	// host operator the sync or pageable finding must name.
	syncOperator, pageableOperator string
	// the host op the largest idle gap is attributed to, when the trace
	// has one long stall.
	gapOperator string
}

var realTimelineCases = []timelineCase{
	// Small models idle in many short launch gaps, or in one stall of
	// host work (randn on the CPU) without a named cause: info only.
	{name: "resnet_train_clean", path: memtest.Testdata("traces", "resnet_train_clean", "trace.json.gz"),
		fires: map[string]bool{ruleLaunchBound: true}},
	{name: "leak_module_cache", path: memtest.Testdata("traces", "leak_module_cache", "trace.json.gz"),
		fires: map[string]bool{ruleLaunchBound: true}},
	{name: "leak_eval_no_grad", path: memtest.Testdata("traces", "leak_eval_no_grad", "trace.json.gz"),
		fires: map[string]bool{ruleLaunchBound: true}},
	{name: "compiled_model", path: memtest.Testdata("traces", "compiled_model", "trace.json.gz"),
		fires: map[string]bool{ruleLaunchBound: true}},
	{name: "no_memory", path: memtest.Testdata("traces", "no_memory", "trace.json.gz"),
		fires: map[string]bool{ruleLaunchBound: true}},
	{name: "frag_small_allocs", path: memtest.Testdata("traces", "frag_small_allocs", "trace.json.gz"),
		fires:            map[string]bool{ruleLaunchBound: true, rulePageableH2D: true},
		pageableOperator: "aten::to"},
	{name: "copies_item_sync", path: memtest.Testdata("gputimeline", "copies_item_sync", "trace.json.gz"),
		fires:        map[string]bool{ruleLaunchBound: true, rulePageableH2D: true, ruleSyncCopy: true, ruleLowMemcpyBW: true},
		syncOperator: "aten::to", pageableOperator: "aten::to", gapOperator: "aten::randn"},
	{name: "slow_loader_pinned", path: memtest.Testdata("gputimeline", "slow_loader_pinned", "trace.json.gz"),
		fires:       map[string]bool{ruleIdleGaps: true},
		gapOperator: "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"},
	// Recorded by the GPU helper: bf16 autocast, loss.item() every step,
	// pageable uploads, a DataLoader sleeping 20 ms per batch.
	{name: "amp_item_sync_slow_loader", path: memtest.Testdata("gpu", "amp_item_sync_slow_loader", "trace.json.gz"),
		fires:        map[string]bool{ruleIdleGaps: true, rulePageableH2D: true, ruleSyncCopy: true},
		syncOperator: "aten::item", pageableOperator: "aten::to",
		gapOperator: "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"},
	{name: "big_transformer", path: memtest.Testdata("traces", "big_transformer", "trace.json.gz"),
		fires: map[string]bool{}},
}

func TestTimelineRulesOnRealTraces(t *testing.T) {
	for _, tc := range realTimelineCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.path); err != nil {
				t.Fatalf("test trace missing: %v", err)
			}
			if tc.name == "big_transformer" && testing.Short() {
				t.Skip("76 MB of JSON for the oracle")
			}
			tr := memtest.SharedTrace(t, tc.path)
			o := memtest.SharedOracle(t, tc.path)
			for _, id := range timelineRuleIDs {
				fs := findingsOf(t, tr, id)
				if got := len(fs) > 0; got != tc.fires[id] {
					t.Errorf("%s: fired=%v, want %v: %+v", id, got, tc.fires[id], fs)
					continue
				}
				for _, f := range fs {
					if f.Advice == "" || f.Detail == "" || f.Title == "" || len(f.Metrics) == 0 {
						t.Errorf("%s: finding without evidence or advice: %+v", id, f)
					}
				}
				switch id {
				case ruleIdleGaps, ruleLaunchBound:
					checkIdleAgainstOracle(t, tr, o, fs, tc)
				case rulePageableH2D:
					checkPageableAgainstOracle(t, o, fs, tc)
				case ruleSyncCopy:
					checkSyncAgainstOracle(t, o, fs, tc)
				case ruleLowMemcpyBW:
					checkBandwidthAgainstOracle(t, o, fs)
				}
			}
		})
	}
}

func checkIdleAgainstOracle(t *testing.T, tr *chrometrace.Trace, o *memtest.Oracle, fs []Finding, tc timelineCase) {
	t.Helper()
	// Whether it fired or not, the oracle's median decides.
	want := median(o.IdleFractions(0))
	fired := tc.fires[ruleIdleGaps] || tc.fires[ruleLaunchBound]
	if fired != (want > ruleNamed(t, ruleIdleGaps).Threshold) {
		t.Errorf("oracle median idle %.3f disagrees with fired=%v", want, fired)
	}
	if len(fs) == 0 {
		return
	}
	if len(fs) != 1 {
		t.Fatalf("want one idle finding (one GPU), got %d", len(fs))
	}
	f := fs[0]
	if got := f.Metrics["median_idle_fraction"]; !near(got, want, 1e-9) {
		t.Errorf("median idle fraction %.6f, oracle %.6f", got, want)
	}
	fr := o.IdleFractions(0)
	if got, w := f.Metrics["max_idle_fraction"], slices.Max(fr); !near(got, w, 1e-9) {
		t.Errorf("max idle fraction %.6f, oracle %.6f", got, w)
	}
	if int(f.Metrics["steps"]) != len(o.Steps) {
		t.Errorf("steps %v, oracle %d", f.Metrics["steps"], len(o.Steps))
	}
	if gap := f.Metrics["largest_gap_us"]; gap <= 0 || gap*1e3 > float64(maxStepNs(o)) {
		t.Errorf("largest gap %v µs outside (0, longest step]", gap)
	}
	if tc.gapOperator != "" && f.Operator != tc.gapOperator {
		t.Errorf("gap operator %q, want %q (%s)", f.Operator, tc.gapOperator, f.Detail)
	}
	// The traces with a planted stall (a slow loader, randn on the CPU)
	// must read as one stall; the small models of the seed traces idle in
	// many short launch gaps.
	stall := strings.Contains(f.Detail, "one stall")
	if want := tc.gapOperator != ""; stall != want || (f.Metrics["largest_gap_share_of_step_idle"] >= 0.5) != want {
		t.Errorf("stall=%v (largest gap %.2f of its step's idle), want %v: %s", stall, f.Metrics["largest_gap_share_of_step_idle"], want, f.Detail)
	}
	if !stall && !strings.Contains(f.Advice, "launch") {
		t.Errorf("spread-out idle time without launch-bound advice: %s", f.Advice)
	}
}

func maxStepNs(o *memtest.Oracle) int64 {
	var m int64
	for _, s := range o.Steps {
		m = max(m, s[1]-s[0])
	}
	return m
}

func checkPageableAgainstOracle(t *testing.T, o *memtest.Oracle, fs []Finding, tc timelineCase) {
	t.Helper()
	pageable := o.CopiesNamed("Memcpy HtoD (Pageable", 0)
	if len(fs) == 0 {
		if len(pageable) >= len(o.Steps) {
			t.Errorf("silent, but the trace has %d pageable uploads in %d steps", len(pageable), len(o.Steps))
		}
		return
	}
	f := fs[0]
	var bytes int64
	for _, c := range pageable {
		bytes += c.Bytes
	}
	if int(f.Metrics["copies"]) != len(pageable) || int64(f.Metrics["bytes"]) != bytes {
		t.Errorf("copies %v bytes %v, oracle %d and %d", f.Metrics["copies"], f.Metrics["bytes"], len(pageable), bytes)
	}
	if got, want := f.Metrics["copies_per_step"], float64(len(pageable))/float64(len(o.Steps)); !near(got, want, 1e-12) {
		t.Errorf("copies per step %v, oracle %v", got, want)
	}
	if f.Operator != tc.pageableOperator {
		t.Errorf("operator %q, want %q", f.Operator, tc.pageableOperator)
	}
	if f.Metrics["host_blocked_us_per_step"] <= 0 {
		t.Errorf("no host time found for synchronous pageable copies: %v", f.Metrics)
	}
}

func checkSyncAgainstOracle(t *testing.T, o *memtest.Oracle, fs []Finding, tc timelineCase) {
	t.Helper()
	d2h := o.CopiesNamed("Memcpy DtoH", 0)
	if len(fs) == 0 {
		if len(o.Steps) > 0 && o.StepsWith(d2h) == len(o.Steps) {
			t.Errorf("silent, but every step has a device-to-host copy")
		}
		return
	}
	f := fs[0]
	if int(f.Metrics["copies"]) != len(d2h) || int(f.Metrics["steps_with_copy"]) != o.StepsWith(d2h) || int(f.Metrics["steps"]) != len(o.Steps) {
		t.Errorf("copies %v in %v of %v steps, oracle %d in %d of %d", f.Metrics["copies"], f.Metrics["steps_with_copy"], f.Metrics["steps"],
			len(d2h), o.StepsWith(d2h), len(o.Steps))
	}
	if f.Operator != tc.syncOperator {
		t.Errorf("operator %q, want %q", f.Operator, tc.syncOperator)
	}
	if f.Metrics["host_blocked_us_per_step"] <= 0 {
		t.Errorf("no blocked host time: %v", f.Metrics)
	}
	if f.Location == nil {
		t.Errorf("no Python location though the trace has stacks")
	}
}

func checkBandwidthAgainstOracle(t *testing.T, o *memtest.Oracle, fs []Finding) {
	t.Helper()
	large := append(o.CopiesNamed("Memcpy HtoD", 1<<20), o.CopiesNamed("Memcpy DtoH", 1<<20)...)
	var best float64
	for _, c := range large {
		best = max(best, c.Bandwidth)
	}
	limit := ruleNamed(t, ruleLowMemcpyBW).Threshold * best
	for _, f := range fs {
		// Kineto's own bandwidth figure is the oracle.
		if !near(f.Metrics["best_gbps"], best, 1e-6) {
			t.Errorf("best %v GB/s, Kineto says %v", f.Metrics["best_gbps"], best)
		}
		prefix := "Memcpy HtoD"
		if strings.Contains(f.Title, "device-to-host") {
			prefix = "Memcpy DtoH"
		}
		var slow []float64
		for _, c := range o.CopiesNamed(prefix, 1<<20) {
			if c.Bandwidth < limit {
				slow = append(slow, c.Bandwidth)
			}
		}
		slices.Sort(slow)
		if len(slow) == 0 || int(f.Metrics["copies"]) != len(slow) || !near(f.Metrics["median_gbps"], slow[len(slow)/2], 1e-6) {
			t.Errorf("%s: %v copies at median %v GB/s, Kineto: %v", prefix, f.Metrics["copies"], f.Metrics["median_gbps"], slow)
		}
	}
}

// TestAmpItemSyncSlowLoaderTruth checks the findings against what the
// recording script says it planted (truth.json): copies per step, their
// size, and the Python frames around the planted lines. Kineto names a
// frame by the line its function starts on, so a finding's line is the
// enclosing def, at or above the planted line.
func TestAmpItemSyncSlowLoaderTruth(t *testing.T) {
	dir := "../testdata/gpu/amp_item_sync_slow_loader/"
	raw, err := os.ReadFile(dir + "truth.json")
	if err != nil {
		t.Fatal(err)
	}
	type truthSite struct {
		File string `json:"file"`
		Line int    `json:"line"`
	}
	var truth struct {
		Window struct{ Active int } `json:"window"`
		Sync   struct {
			Memcpy string    `json:"memcpy"`
			Copies int       `json:"copies"`
			Bytes  int64     `json:"bytes"`
			Site   truthSite `json:"site"`
		} `json:"sync_per_step"`
		H2D struct {
			Memcpy    string    `json:"memcpy"`
			Copies    int       `json:"copies"`
			BytesEach int64     `json:"bytes_each"`
			Site      truthSite `json:"site"`
		} `json:"h2d_per_step"`
		Loader struct {
			SleepS float64   `json:"sleep_s_per_batch"`
			Site   truthSite `json:"site"`
		} `json:"loader"`
	}
	if err := json.Unmarshal(raw, &truth); err != nil {
		t.Fatal(err)
	}
	tr := memtest.Trace(t, dir+"trace.json.gz")
	steps := truth.Window.Active
	atOrAbove := func(what string, got *site.Location, want truthSite) {
		t.Helper()
		// A trace names the frame by its function's def line: at or above
		// the running line, said as a def line (Line 0: not recorded).
		if got == nil || got.File != want.File || got.Line != 0 || got.DefLine > want.Line || got.DefLine < want.Line-40 {
			t.Errorf("%s: location %+v, want the function around %s:%d", what, got, want.File, want.Line)
		}
	}

	sync := findingsOf(t, tr, ruleSyncCopy)
	if len(sync) != 1 {
		t.Fatalf("sync: %+v", sync)
	}
	m := sync[0].Metrics
	if int(m["steps"]) != steps || int(m["steps_with_copy"]) != steps || int(m["copies"]) != truth.Sync.Copies*steps ||
		int64(m["median_bytes_per_copy"]) != truth.Sync.Bytes {
		t.Errorf("sync metrics %v, truth %d copies of %d B in each of %d steps", m, truth.Sync.Copies, truth.Sync.Bytes, steps)
	}
	atOrAbove("sync", sync[0].Location, truth.Sync.Site)

	h2d := findingsOf(t, tr, rulePageableH2D)
	if len(h2d) != 1 {
		t.Fatalf("pageable: %+v", h2d)
	}
	m = h2d[0].Metrics
	if int(m["copies"]) != truth.H2D.Copies*steps || int64(m["bytes_per_step"]) != int64(truth.H2D.Copies)*truth.H2D.BytesEach ||
		int64(m["largest_copy_bytes"]) != truth.H2D.BytesEach {
		t.Errorf("pageable metrics %v, truth %d x %d B per step", m, truth.H2D.Copies, truth.H2D.BytesEach)
	}
	atOrAbove("pageable", h2d[0].Location, truth.H2D.Site)

	idle := findingsOf(t, tr, ruleIdleGaps)
	if len(idle) != 1 {
		t.Fatalf("idle: %+v", idle)
	}
	// The loader sleeps SleepS per batch, so the largest gap is at least that.
	if gap := idle[0].Metrics["largest_gap_us"]; gap < truth.Loader.SleepS*1e6 {
		t.Errorf("largest gap %.0f µs, shorter than the loader's %.0f ms sleep", gap, truth.Loader.SleepS*1e3)
	}
	atOrAbove("idle", idle[0].Location, truth.Loader.Site)
}

// ---- synthetic traces for the edges

func TestSyncCopySynthetic(t *testing.T) {
	cases := []struct {
		name      string
		steps     int
		withCopy  []bool // per step
		threshold float64
		wantFire  bool
		wantWhole bool
	}{
		{name: "every step", steps: 4, withCopy: []bool{true, true, true, true}, threshold: 0.9, wantFire: true},
		{name: "half the steps", steps: 4, withCopy: []bool{true, false, true, false}, threshold: 0.9},
		{name: "half the steps, lower threshold", steps: 4, withCopy: []bool{true, false, true, false}, threshold: 0.5, wantFire: true},
		{name: "no copy", steps: 3, withCopy: []bool{false, false, false}, threshold: 0.9},
		{name: "no steps: the whole trace is one window", steps: 0, withCopy: []bool{true}, threshold: 0.9, wantFire: true, wantWhole: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s memtest.Synth
			for i, has := range tc.withCopy {
				base := float64(1000 + i*1000)
				if tc.steps > 0 {
					s.Step(i+1, base, 900)
				}
				s.Py("train.py(40): train_step", 2*i+1, -1, base+10, 600)
				s.Kernel(0, 7, base+20, 50)
				if has {
					s.ItemCopy(base+100, 100*(i+1))
				}
			}
			r := ruleNamed(t, ruleSyncCopy)
			r.Threshold = tc.threshold
			fs := Run([]Rule{r}, &Input{Trace: s.Trace(t)})
			if (len(fs) > 0) != tc.wantFire {
				t.Fatalf("fired=%v, want %v: %+v", len(fs) > 0, tc.wantFire, fs)
			}
			if !tc.wantFire {
				return
			}
			f := fs[0]
			copies := 0
			for _, h := range tc.withCopy {
				if h {
					copies++
				}
			}
			windows := max(tc.steps, 1)
			if int(f.Metrics["copies"]) != copies || int(f.Metrics["steps"]) != windows || f.Metrics["median_bytes_per_copy"] != 4 {
				t.Errorf("metrics %v, want %d copies of 4 B in %d windows", f.Metrics, copies, windows)
			}
			// cudaMemcpyAsync 5 µs + cudaStreamSynchronize 20 µs per copy.
			if want := 25.0 * float64(copies) / float64(windows); !near(f.Metrics["host_blocked_us_per_step"], want, 1e-9) {
				t.Errorf("blocked %v µs per step, want %v", f.Metrics["host_blocked_us_per_step"], want)
			}
			if f.Operator != "aten::item" || !strings.Contains(f.Detail, "aten::item > aten::_local_scalar_dense") {
				t.Errorf("operator %q, detail %q", f.Operator, f.Detail)
			}
			if f.Location == nil || f.Location.File != "train.py" || f.Location.Line != 0 || f.Location.DefLine != 40 || f.Location.Function != "train_step" {
				t.Errorf("location %+v, want train.py, def line 40, train_step", f.Location)
			}
			if got := strings.Contains(f.Detail, "no ProfilerStep"); got != tc.wantWhole {
				t.Errorf("whole-trace note=%v, want %v: %s", got, tc.wantWhole, f.Detail)
			}
		})
	}
}

func TestIdleGapsSynthetic(t *testing.T) {
	t.Run("several devices, overlapping streams", func(t *testing.T) {
		var s memtest.Synth
		// Two 1000 µs steps. GPU 0: two streams overlap into [0,800)
		// of each step (20% idle); GPU 1: one 100 µs kernel (90% idle).
		for i := range 2 {
			base := float64(10000 + 2000*i)
			s.Step(i+1, base, 1000)
			s.Kernel(0, 7, base, 500)
			s.Kernel(0, 8, base+300, 500)
			s.Kernel(1, 7, base+100, 100)
			s.Host("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", base+560, 400, 0)
		}
		// GPU 1 idles 900 of 1000 µs, the loader covering 400 of them
		// (44%): the largest explained cause is named, with its share,
		// not "launch bound" (issue #30: a slow DataLoader at 47%).
		if fs := findingsOf(t, s.Trace(t), ruleLaunchBound); len(fs) != 0 {
			t.Errorf("launch-bound although data loading explains 44%% of the idle time: %+v", fs)
		}
		fs := findingsOf(t, s.Trace(t), ruleIdleGaps)
		if len(fs) != 1 || !strings.Contains(fs[0].Title, "input starvation (the largest explained cause: 44% of the idle time") {
			t.Fatalf("want input starvation named for GPU 1 with its share, got %+v", fs)
		}
		f := fs[0]
		if f.Metrics["device"] != 1 || !near(f.Metrics["median_idle_fraction"], 0.9, 1e-12) || !near(f.Metrics["data_wait_fraction"], 0.4, 1e-12) {
			t.Errorf("metrics %v, want device 1 idle 0.9, data wait 0.4", f.Metrics)
		}
		// The largest gap on GPU 1 is [200, 1000) of a step: 800 µs, while
		// the loader ran from 560 to 960.
		if !near(f.Metrics["largest_gap_us"], 800, 1e-12) || f.Operator != "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" {
			t.Errorf("gap %v µs, operator %q", f.Metrics["largest_gap_us"], f.Operator)
		}

		// At 0.1, GPU 0 idles 200 µs per step, 160 of them fetching data:
		// input starvation, a warning.
		r := ruleNamed(t, ruleIdleGaps)
		r.Threshold = 0.1
		fs = Run([]Rule{r}, &Input{Trace: s.Trace(t)})
		if len(fs) != 2 || fs[0].Metrics["device"] != 0 || !near(fs[0].Metrics["median_idle_fraction"], 0.2, 1e-12) ||
			fs[0].Severity != Warning || !strings.HasSuffix(fs[0].Title, "input starvation") {
			t.Errorf("at 0.1 want GPU 0 (idle 0.2) starving, then GPU 1: %+v", fs)
		}
	})
	t.Run("a sync the GPU drains in", func(t *testing.T) {
		// Kernels until 600 µs of each step; the host waits in
		// cudaDeviceSynchronize from 100 to 610 and launches nothing more:
		// the 400 µs gap opened in the sync.
		var s memtest.Synth
		for i := range 3 {
			base := float64(10000 + 2000*i)
			s.Step(i+1, base, 1000)
			s.Kernel(0, 7, base, 600)
			s.Host("cuda_runtime", "cudaDeviceSynchronize", base+100, 510, 0)
		}
		fs := findingsOf(t, s.Trace(t), ruleIdleGaps)
		if len(fs) != 1 || !strings.HasSuffix(fs[0].Title, "a host sync every step") || !near(fs[0].Metrics["sync_wait_fraction"], 0.4, 1e-12) {
			t.Errorf("want a per-step sync warning: %+v", fs)
		}
		if fs := findingsOf(t, s.Trace(t), ruleLaunchBound); len(fs) != 0 {
			t.Errorf("launch-bound as well: %+v", fs)
		}
		// The same sync called after the GPU ran dry (host bound) is not
		// the cause.
		var h memtest.Synth
		for i := range 3 {
			base := float64(10000 + 2000*i)
			h.Step(i+1, base, 1000)
			h.Kernel(0, 7, base, 300)
			h.Host("cuda_runtime", "cudaDeviceSynchronize", base+400, 10, 0)
		}
		if fs := findingsOf(t, h.Trace(t), ruleIdleGaps); len(fs) != 0 {
			t.Errorf("a sync after the GPU went idle named as the cause: %+v", fs)
		}
		if fs := findingsOf(t, h.Trace(t), ruleLaunchBound); len(fs) != 1 || fs[0].Severity != Info {
			t.Errorf("want launch-bound info: %+v", fs)
		}
	})
	t.Run("no device ops", func(t *testing.T) {
		var s memtest.Synth
		s.Step(1, 100, 1000)
		s.Host("cpu_op", "aten::add", 200, 10, 1)
		tr := s.Trace(t)
		for _, id := range timelineRuleIDs {
			if fs := findingsOf(t, tr, id); len(fs) != 0 {
				t.Errorf("%s on a CPU-only trace: %+v", id, fs)
			}
		}
	})
	t.Run("no steps", func(t *testing.T) {
		var s memtest.Synth
		s.Host("cpu_op", "aten::mm", 0, 1000, 1)
		s.Kernel(0, 7, 100, 100)
		fs := findingsOf(t, s.Trace(t), ruleLaunchBound)
		if len(fs) != 1 || !near(fs[0].Metrics["median_idle_fraction"], 0.9, 1e-12) || !strings.Contains(fs[0].Detail, "no ProfilerStep") {
			t.Errorf("want the whole trace 90%% idle with the note: %+v", fs)
		}
	})
}

func TestCopyRulesSynthetic(t *testing.T) {
	const mib = 1 << 20
	upload := func(s *memtest.Synth, ts float64, name string, bytes int64, dur float64, ext int) {
		s.Host("cpu_op", "aten::to", ts, dur+20, ext-1)
		s.Host("cpu_op", "aten::copy_", ts+1, dur+18, ext)
		s.Host("cuda_runtime", "cudaMemcpyAsync", ts+2, dur+10, ext)
		s.Dev("gpu_memcpy", name, 0, 7, ts+5, dur, bytes, ext)
	}
	t.Run("pageable and pinned", func(t *testing.T) {
		var s memtest.Synth
		for i := range 3 {
			base := float64(10000 * (i + 1))
			s.Step(i+1, base, 9000)
			// 64 MiB at 5 GB/s pageable, 50 GB/s pinned, and a small one.
			upload(&s, base+10, "Memcpy HtoD (Pageable -> Device)", 64*mib, 64*mib/5e3, 10*i+2)
			upload(&s, base+5000, "Memcpy HtoD (Pinned -> Device)", 64*mib, 64*mib/50e3, 10*i+4)
			upload(&s, base+7000, "Memcpy HtoD (Pageable -> Device)", 4, 1, 10*i+6)
		}
		tr := s.Trace(t)
		fs := findingsOf(t, tr, rulePageableH2D)
		if len(fs) != 1 || fs[0].Metrics["copies"] != 6 || fs[0].Metrics["copies_per_step"] != 2 ||
			fs[0].Metrics["bytes"] != float64(3*(64*mib+4)) || fs[0].Operator != "aten::to" {
			t.Errorf("pageable: %+v", fs)
		}
		fs = findingsOf(t, tr, ruleLowMemcpyBW)
		if len(fs) != 1 || fs[0].Metrics["copies"] != 3 || !near(fs[0].Metrics["median_gbps"], 5, 1e-3) ||
			!near(fs[0].Metrics["best_gbps"], 50, 1e-3) || fs[0].Metrics["pageable_copies"] != 3 {
			t.Errorf("bandwidth: %+v", fs)
		}
		r := ruleNamed(t, rulePageableH2D)
		r.Threshold = 3
		if fs := Run([]Rule{r}, &Input{Trace: tr}); len(fs) != 0 {
			t.Errorf("2 per step under a threshold of 3 fired: %+v", fs)
		}
	})
	t.Run("only pageable: nothing faster to compare with", func(t *testing.T) {
		var s memtest.Synth
		s.Step(1, 1000, 90000)
		upload(&s, 1010, "Memcpy HtoD (Pageable -> Device)", 64*mib, 64*mib/5e3, 2)
		upload(&s, 30000, "Memcpy HtoD (Pageable -> Device)", 64*mib, 64*mib/6e3, 4)
		if fs := findingsOf(t, s.Trace(t), ruleLowMemcpyBW); len(fs) != 0 {
			t.Errorf("fired without a reference copy: %+v", fs)
		}
	})
	t.Run("non-blocking copy into pinned memory does not block", func(t *testing.T) {
		var s memtest.Synth
		for i := range 3 {
			base := float64(1000 * (i + 1))
			s.Step(i+1, base, 900)
			// x.to("cpu", non_blocking=True) into pinned memory: no sync.
			upload(&s, base+10, "Memcpy DtoH (Device -> Pinned)", 4*mib, 100, 10*i+2)
		}
		tr := s.Trace(t)
		if fs := findingsOf(t, tr, ruleSyncCopy); len(fs) != 0 {
			t.Errorf("fired on asynchronous copies: %+v", fs)
		}
		// The same copies with a cudaStreamSynchronize after each do block.
		for i := range 3 {
			s.Host("cuda_runtime", "cudaStreamSynchronize", float64(1000*(i+1))+120, 5, 10*i+2)
		}
		fs := findingsOf(t, s.Trace(t), ruleSyncCopy)
		if len(fs) != 1 || fs[0].Metrics["steps_with_copy"] != 3 || fs[0].Operator != "aten::to" {
			t.Errorf("with a synchronize: %+v", fs)
		}
	})
	t.Run("copies without host ops", func(t *testing.T) {
		var s memtest.Synth
		s.Step(1, 1000, 1000)
		s.Dev("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 0, 7, 1100, 10, 4, 0)
		fs := findingsOf(t, s.Trace(t), ruleSyncCopy)
		if len(fs) != 1 || fs[0].Operator != "(no host operator)" || fs[0].Metrics["host_blocked_us_per_step"] != 0 {
			t.Errorf("%+v", fs)
		}
	})
}

// All four rules on one input share analyses through Memo; running them
// together twice must neither deadlock nor change the answer.
func TestTimelineRulesShareAnalyses(t *testing.T) {
	tr := memtest.Trace(t, memtest.Testdata("gputimeline", "copies_item_sync", "trace.json.gz"))
	in := &Input{Trace: tr}
	var rs []Rule
	for _, id := range timelineRuleIDs {
		rs = append(rs, ruleNamed(t, id))
	}
	first := Run(rs, in)
	second := Run(rs, in)
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	if string(a) != string(b) || len(first) != 5 {
		t.Errorf("%d then %d findings, or they differ", len(first), len(second))
	}
}

// BenchmarkTimelineRules runs each rule on the largest trace, and on
// frag_small_allocs, whose 1200 uploads exercise the host attribution that
// big_transformer (no host<->device copies) never reaches. Thresholds at 0
// make every rule build its full evidence.
func BenchmarkTimelineRules(b *testing.B) {
	for _, name := range []string{"big_transformer", "frag_small_allocs"} {
		tr := memtest.Trace(b, memtest.Testdata("traces", name, "trace.json.gz"))
		for _, id := range timelineRuleIDs {
			r := ruleNamed(b, id)
			r.Threshold = 0
			b.Run(name+"/"+id, func(b *testing.B) {
				for b.Loop() {
					// A fresh Input each time: the cost includes the shared analyses.
					Run([]Rule{r}, &Input{Trace: tr})
				}
			})
		}
	}
}

// FuzzTimelineRules runs the four rules on whatever the reader accepts:
// odd times, overlapping steps, copies without host ops, missing devices
// must give findings or none, never a panic. The corpus grown by
// `go test -fuzz` is kept in testdata/fuzz/FuzzTimelineRules.
func FuzzTimelineRules(f *testing.F) {
	var s memtest.Synth
	s.Step(1, 1000, 900)
	s.Step(2, 1500, 900) // overlaps step 1
	s.Py("train.py(40): train_step", 1, -1, 1010, 600)
	s.Kernel(0, 7, 1020, 50)
	s.Kernel(3, 9, 990, 5000)
	s.ItemCopy(1100, 100)
	s.Dev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 1200, 0, 1<<21, 0)
	s.Dev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 0, 7, 1300, 10, 1<<22, 7)
	f.Add([]byte(`{"traceEvents":[` + strings.Join(s.Events, ",") + `]}`))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":5,"dur":0}]}`))
	var rs []Rule
	for _, id := range timelineRuleIDs {
		rs = append(rs, ruleNamed(f, id))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := chrometrace.Read(strings.NewReader(string(data)), chrometrace.ReadOptions{Workers: 1})
		if err != nil {
			return
		}
		for _, fd := range Run(rs, &Input{Trace: tr}) {
			for k, v := range fd.Metrics {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%s: metric %s = %v", fd.Rule, k, v)
				}
			}
		}
	})
}
