package growth_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// The measuring instrument of issue #38: a labeled corpus of step series
// and the quality table of the step-series verdict that ships
// (steplog.Analyze, the one `torchmem steps` and `analyze` use).
//
//   - Real: every steps log (and memory_summary() log) in testdata whose
//     recording has a truth.json, labeled leak or healthy from it.
//   - Semi-synthetic: every real healthy series (requested bytes and
//     allocated bytes) is a noise background; leaks (constant, late start,
//     staircase of period 2..25, accelerating, uneven 0.5-1.5x rises) and
//     healthy look-alikes (warm-up ramps, caches that fill then stay,
//     spikes that fall back, one-time jumps) are planted in it with fixed
//     seeds. Backgrounds with a drift are not tiled: a case longer than
//     such a background is skipped (the table says how many).
//
// Print the table: go test ./memtimeline/growth -run TestCorpusQuality -v

const mib = 1 << 20

// unit is the smallest noise a planted size is measured in: the
// allocator's granularity (a background of exact requested bytes has none).
const unit = 512

// realLeaks names the steps logs whose recording planted a leak that the
// log sees (truth.json: "leak" with bytes per step, or "planted" saying a
// tensor is kept every step), with the bytes per step the truth gives; 0
// where truth.json gives no figure. Every other log of a recording with a
// truth.json is healthy (a bounded queue or cache included).
var realLeaks = map[string]int64{
	"gpu/ddp_one_rank_leaks/rank1/stats_steps.jsonl":                     8 * mib,
	"gpu/diff_pair/head_leak/stats_steps.jsonl":                          4 * mib,
	"gpu/eval_keeps_logits/vm_612_20261201-080143_rank0.steps.jsonl":     3 * mib,
	"gpu/evidence/compiled_keeps_logits/run_rank0.steps.jsonl":           4 * mib,
	"gpu/evidence/hook_every_step/run_rank0.steps.jsonl":                 mib,
	"gpu/evidence/hook_once/run_rank0.steps.jsonl":                       mib,
	"gpu/evidence/inference_kv_cache/run_rank0.steps.jsonl":              4 * mib,
	"gpu/evidence/oom_fraction/run_rank0.steps.jsonl":                    256 * mib,
	"gpu/evidence/periodic_eval/run_rank0.steps.jsonl":                   8 * mib / 5,
	"gpu/evidence/trace_off_leak/run_rank0.steps.jsonl":                  mib / 4,
	"gpu/hf_trainer_leak/vm_816_20261201-080229_rank0.steps.jsonl":       0,
	"gpu/late_start_leak/vm_472_20261201-080107_rank0.steps.jsonl":       4 * mib,
	"gpu/leak_hook_every_step/stats_steps.jsonl":                         0,
	"gpu/leak_retain_graph/stats_steps.jsonl":                            0,
	"gpu/lightning_leak/vm_957_20261201-080301_rank0.steps.jsonl":        2 * mib,
	"gpu/logged_memory_summary/vm_682_20261201-080201_rank0.steps.jsonl": 8 * mib,
	"gpu/logged_memory_summary/train.log":                                8 * mib,
	"gpu/logged_memory_summary/train_block.log":                          8 * mib,
	"gpu/small_leak_big_model/vm_507_20261201-080117_rank0.steps.jsonl":  mib / 2,
	"gpu/multirank/ddp4_leak/ddp4_leak_rank2.steps.jsonl":                0,
	"gpu/multirank/fsdp2_leak/fsdp2_leak_rank1.steps.jsonl":              0,
	"gpu/watch/leak/vm_440_20261201-211526_rank0.steps.jsonl":            4 * mib,
	"gpu/watch/leak_profile/vm_477_20261201-211535_rank0.steps.jsonl":    4 * mib,
	"gpu/watch/near_oom/vm_548_20261201-211558_rank0.steps.jsonl":        64 * mib,
	"gpu/watch/periodic/vm_624_20261201-211621_rank0.steps.jsonl":        8 * mib / 5,
	"gpu/watch/ddp/vm_682_20261201-211637_rank1.steps.jsonl":             4 * mib,
	"smi/nvidia_smi_leak.steps.jsonl":                                    64 * mib,
	"smi/per_process/leak/vm_518_20261201-210619_rank0.steps.jsonl":      32 * mib,
	"steps/leak_eval_no_grad.stats_steps.jsonl":                          0,
	"steps/leak_module_cache.stats_steps.jsonl":                          4 * mib,
	"steps/nvidia_smi_leak.stats_steps.jsonl":                            64 * mib,
	"traces/leak_eval_no_grad/stats_steps.jsonl":                         0,
	"traces/leak_module_cache/stats_steps.jsonl":                         4 * mib,
}

// round4Label reads a round-4 recording's truth.json (testdata/gpu/round4,
// recorded for this corpus): a leak when "leak" names one on the GPU and
// "expect" does not say otherwise; in a multi-rank job, the rank whose
// snippet cached a leak snapshot (cached_bytes > 0) leaks and the others
// are healthy. A leak of pinned host memory is not in a GPU steps log:
// skipped.
func round4Label(t testing.TB, root, rel string) (leak bool, truth int64, skip bool) {
	dir := filepath.Join(root, filepath.Dir(rel))
	raw, err := os.ReadFile(filepath.Join(dir, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Leak *struct {
			BytesPerStep *int64 `json:"bytes_per_step"`
			Device       string `json:"device"`
		} `json:"leak"`
		Expect *struct {
			Leak *bool `json:"leak"`
		} `json:"expect"`
		Ranks []struct {
			Files  []string `json:"files"`
			Cached int64    `json:"cached_bytes"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	if tr.Leak != nil && tr.Leak.Device == "host" {
		return false, 0, true
	}
	if len(tr.Ranks) > 0 && tr.Leak == nil {
		for _, r := range tr.Ranks {
			if slices.Contains(r.Files, filepath.Base(rel)) {
				return r.Cached > 0, 0, false
			}
		}
		return false, 0, true
	}
	leak = tr.Leak != nil && (tr.Expect == nil || tr.Expect.Leak == nil || *tr.Expect.Leak)
	if leak && tr.Leak.BytesPerStep != nil {
		truth = *tr.Leak.BytesPerStep
	}
	return leak, truth, false
}

// realCase is one series of a real recording.
type realCase struct {
	path   string // relative to testdata
	device string
	leak   bool
	truth  int64 // bytes per step, 0 unknown
	log    *steplog.Log
}

// hasTruth reports whether the recording of a testdata file has a
// truth.json (in its folder or a parent up to testdata, or beside it).
func hasTruth(root, rel string) bool {
	base := filepath.Base(rel)
	for _, suf := range []string{".stats_steps.jsonl", ".steps.jsonl"} {
		if stem, ok := strings.CutSuffix(base, suf); ok {
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(rel), stem+".truth.json")); err == nil {
				return true
			}
		}
	}
	for d := filepath.Dir(rel); d != "." && d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(root, d, "truth.json")); err == nil {
			return true
		}
	}
	return false
}

// loadReal reads every steps log and memory_summary() log in testdata
// with a truth.json.
func loadReal(t testing.TB) []realCase {
	t.Helper()
	root := "../../testdata"
	var out []realCase
	err := filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		isSteps := strings.HasSuffix(rel, "steps.jsonl")
		isSummary := strings.HasSuffix(rel, ".log") && strings.Contains(rel, "memory_summary")
		if !isSteps && !isSummary || !hasTruth(root, rel) {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		var log *steplog.Log
		if isSteps {
			if log, err = steplog.Read(f); err != nil {
				t.Fatalf("%s: %v", rel, err)
			}
		} else {
			sl, err := memsummary.Read(f)
			if err != nil {
				t.Fatalf("%s: %v", rel, err)
			}
			log = sl.StepLog()
		}
		truth, leak := realLeaks[rel]
		if strings.HasPrefix(rel, "gpu/round4/") {
			var skip bool
			if leak, truth, skip = round4Label(t, root, rel); skip {
				return nil
			}
		}
		for _, s := range log.Series {
			out = append(out, realCase{path: rel, device: s.Device, leak: leak, truth: truth, log: &steplog.Log{Series: []*steplog.Series{s}, Keys: log.Keys}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// verdict is what the shipped step-series verdict says of a log.
func verdict(log *steplog.Log) steplog.SeriesReport {
	return steplog.Analyze(log, steplog.DefaultOptions()).Series[0]
}

// background is a real healthy series (after its warm-up record) about
// its median.
type background struct {
	name     string
	vals     []float64
	sigma    float64 // 1.4826 * MAD of its steps
	tileable bool    // no drift: may be repeated to any length
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func noiseOf(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	d := make([]float64, len(v)-1)
	for i := range d {
		d[i] = v[i+1] - v[i]
	}
	m := medianOf(d)
	for i := range d {
		d[i] = math.Abs(d[i] - m)
	}
	return 1.4826 * medianOf(d)
}

// backgrounds takes every real healthy series (requested and allocated
// bytes) with at least 6 values as a background, once per distinct shape.
func backgrounds(real []realCase) []background {
	var out []background
	seen := map[string]bool{}
	add := func(name string, raw []int64) {
		if len(raw) < 7 {
			return
		}
		v := make([]float64, len(raw)-1) // the first record is warm-up
		for i, x := range raw[1:] {
			v[i] = float64(x)
		}
		m := medianOf(v)
		for i := range v {
			v[i] -= m
		}
		key := fmt.Sprint(v)
		if seen[key] {
			return
		}
		seen[key] = true
		sig := noiseOf(v)
		third := max(1, len(v)/3)
		drift := math.Abs(medianOf(v[len(v)-third:]) - medianOf(v[:third]))
		out = append(out, background{name: name, vals: v, sigma: sig, tileable: drift <= 3*max(sig, unit)})
	}
	for _, c := range real {
		if c.leak {
			continue
		}
		s := c.log.Series[0]
		var req, alloc []int64
		for _, r := range s.Records {
			if r.RequestedBytes > 0 {
				req = append(req, r.RequestedBytes)
			}
			if r.AllocatedBytes >= 0 {
				alloc = append(alloc, r.AllocatedBytes)
			}
		}
		if len(req) == len(s.Records) {
			add(c.path+" requested", req)
		}
		add(c.path+" allocated", alloc)
	}
	slices.SortFunc(out, func(a, b background) int { return cmp.Compare(a.name, b.name) })
	return out
}

// jittered adds the allocator's rounding of a step's temporaries to a
// background: i.i.d. -2, 0 or +2 MiB per step (the +-2 MiB the issue's
// H200 recordings show in allocated bytes).
func jittered(b background, rng *rand.Rand, n int) background {
	v := tile(b, n)
	for i := range v {
		v[i] += float64((rng.IntN(3) - 1) * 2 * mib)
	}
	return background{name: b.name + " +jitter", vals: v, sigma: noiseOf(v), tileable: true}
}

// tile repeats a background to n values (mirrored, so that no seam jumps).
func tile(b background, n int) []float64 {
	out := make([]float64, n)
	m := len(b.vals)
	for i := range out {
		k, r := i/m, i%m
		if k%2 == 1 {
			r = m - 1 - r
		}
		out[i] = b.vals[r]
	}
	return out
}

// synthCase is one planted case.
type synthCase struct {
	class string
	leak  bool
	size  float64 // per step (per jump for staircases) in sigmas
	steps int     // how many steps the leak lasts
	start int     // the record the leak starts at
	truth float64 // bytes per step
	bg    string  // the background's name
	log   *steplog.Log
}

// logOf makes a steps log of values: record 0 is the warm-up (the
// background's first value), then one record per value.
func logOf(vals []float64, base float64) *steplog.Log {
	s := &steplog.Series{Records: make([]steplog.Record, 0, len(vals)+1)} // sized: growing it was a quarter of TestCorpusQuality's CPU
	rec := func(step int, v float64) steplog.Record {
		b := int64(math.Round(base + v))
		return steplog.Record{Step: int64(step), AllocatedBytes: b, RequestedBytes: b, ReservedBytes: -1, ActiveBytes: -1,
			PeakAllocatedBytes: -1, PeakReservedBytes: -1, AllocRetries: -1, InactiveSplitBytes: -1}
	}
	s.Records = append(s.Records, rec(0, vals[0]))
	for i, v := range vals {
		s.Records = append(s.Records, rec(i+1, v))
	}
	return &steplog.Log{Series: []*steplog.Series{s}}
}

const base = 4 << 30 // the model's weights and optimizer state

var sizes = []float64{0.5, 1, 2, 3, 5, 10, 20, 50}

// synthesize plants leaks and look-alikes in every background, with
// fixed seeds; skipped counts the cases a drifting background was too
// short for.
func synthesize(bgs []background) (cases []synthCase, skipped int) {
	rng := rand.New(rand.NewPCG(38, 2026))
	lengths := []int{20, 40, 80}
	var all []background
	for _, b := range bgs {
		all = append(all, b)
		if b.tileable {
			all = append(all, jittered(b, rng, 120))
		}
	}
	for _, b := range all {
		sigma := max(b.sigma, unit)
		ns := lengths
		if !b.tileable {
			// A background that drifts (a cache that fills) is used at
			// its own length only: cut short, its fill would reach the
			// end of the log; repeated, it would fill again.
			ns = []int{len(b.vals)}
			skipped += len(lengths)
		}
		for _, n := range ns {
			bg := tile(b, n)
			for _, m := range sizes {
				size := m * sigma
				// Leaks.
				for rep := 0; rep < 1; rep++ {
					// constant, from the first step
					v := slices.Clone(bg)
					for i := range v {
						v[i] += size * float64(i+1)
					}
					cases = append(cases, synthCase{class: "constant", leak: true, size: m, steps: n, start: 1, truth: size, bg: b.name, log: logOf(v, base)})
					// late start, lasting >= 12 steps
					st := int(float64(n) * (0.2 + 0.5*rng.Float64()))
					st = min(st, n-12)
					v = slices.Clone(bg)
					for i := st; i < n; i++ {
						v[i] += size * float64(i-st+1)
					}
					cases = append(cases, synthCase{class: "late start", leak: true, size: m, steps: n - st, start: st + 1, truth: size, bg: b.name, log: logOf(v, base)})
					// uneven: each step keeps 0.5..1.5x the size
					v = slices.Clone(bg)
					var acc float64
					st = rng.IntN(max(1, n/3))
					for i := st; i < n; i++ {
						acc += size * (0.5 + rng.Float64())
						v[i] += acc
					}
					cases = append(cases, synthCase{class: "uneven", leak: true, size: m, steps: n - st, start: st + 1, truth: acc / float64(n-st), bg: b.name, log: logOf(v, base)})
					// staircase: a jump of p*size every p steps (size per
					// step, the measure of a leak), >= 3 jumps,
					// >= 12 steps
					p := 2 + rng.IntN(min(24, (n-1)/3-1))
					{
						first := rng.IntN(max(1, n-max(12, 3*p)))
						v = slices.Clone(bg)
						jumps := 0
						for i := first; i < n; i++ {
							if (i-first)%p == 0 {
								jumps++
							}
							v[i] += size * float64(p) * float64(jumps)
						}
						cases = append(cases, synthCase{class: fmt.Sprintf("staircase p%s", periodBand(p)), leak: true, size: m, steps: n - first, start: first + 1, truth: size, bg: b.name, log: logOf(v, base)})
					}
					// accelerating: the step's size grows from 0.5x to 1.5x
					v = slices.Clone(bg)
					acc = 0
					for i := 0; i < n; i++ {
						acc += size * (0.5 + float64(i)/float64(n))
						v[i] += acc
					}
					cases = append(cases, synthCase{class: "accelerating", leak: true, size: m, steps: n, start: 1, truth: acc / float64(n), bg: b.name, log: logOf(v, base)})
				}
				if m < 2 {
					continue // look-alikes: rises well above the noise
				}
				// Look-alikes.
				for rep := 0; rep < 2; rep++ {
					// warm-up ramp of 3..10 steps, then >= 10 flat
					r := 3 + rng.IntN(8)
					if n-r >= 10 {
						v := slices.Clone(bg)
						for i := range v {
							v[i] += size * float64(min(i+1, r))
						}
						cases = append(cases, synthCase{class: "warm-up ramp", size: m, bg: b.name, log: logOf(v, base)})
					}
					// a cache that fills for 3..30 steps at random sizes, then stays >= 10 steps
					f := 3 + rng.IntN(28)
					if n-f >= 10 {
						st := rng.IntN(n - f - 10 + 1)
						v := slices.Clone(bg)
						var acc float64
						for i := range v {
							if i >= st && i < st+f {
								acc += size * (0.5 + rng.Float64())
							}
							v[i] += acc
						}
						cases = append(cases, synthCase{class: "cache fills", size: m, bg: b.name, log: logOf(v, base)})
					}
					// spikes that fall back within 1..3 steps
					v := slices.Clone(bg)
					for k := 0; k < 1+n/15; k++ {
						at, w := rng.IntN(n), 1+rng.IntN(3)
						for i := at; i < min(n, at+w); i++ {
							v[i] += size
						}
					}
					cases = append(cases, synthCase{class: "spikes", size: m, bg: b.name, log: logOf(v, base)})
					// one or two one-time jumps that stay
					v = slices.Clone(bg)
					for k := 0; k < 1+rep; k++ {
						at := rng.IntN(n)
						for i := at; i < n; i++ {
							v[i] += size
						}
					}
					cases = append(cases, synthCase{class: "one-time jumps", size: m, bg: b.name, log: logOf(v, base)})
				}
			}
			cases = append(cases, synthCase{class: "background", bg: b.name, log: logOf(bg, base)})
		}
	}
	return cases, skipped
}

func periodBand(p int) string {
	switch {
	case p <= 5:
		return "2-5"
	case p <= 12:
		return "6-12"
	}
	return "13-25"
}

func sizeBand(m float64) string {
	switch {
	case m < 2:
		return "<2x"
	case m < 5:
		return "2-5x"
	case m < 20:
		return "5-20x"
	}
	return "20-50x"
}

// quality is the corpus' figures.
type quality struct {
	realLeaks, realLeaksFound     int
	realHealthy, realFalse        int
	realMissed, realFalseNames    []string
	accept, acceptFound           int // planted leaks >= 2x noise, >= 12 steps (constant, late, uneven, staircase)
	acceptWithin10, acceptMeasure int
	bandFound, bandWithin10       map[string]int // the acceptance set by size band
	lookalikes, lookalikeFalse    int
	skipped                       int
	table                         string
}

func measure(t testing.TB) quality {
	var q quality
	real := loadReal(t)
	var b strings.Builder
	fmt.Fprintf(&b, "REAL recordings (testdata with truth.json): %d series\n", len(real))
	for _, c := range real {
		rep := verdict(c.log)
		found := rep.Verdict == steplog.VerdictGrowing
		if c.leak {
			q.realLeaks++
			if found {
				q.realLeaksFound++
			} else {
				q.realMissed = append(q.realMissed, c.path+": "+rep.Reason)
			}
		} else {
			q.realHealthy++
			if found {
				q.realFalse++
				q.realFalseNames = append(q.realFalseNames, c.path+": "+rep.Reason)
			}
		}
	}
	fmt.Fprintf(&b, "  leaks found      %3d / %3d\n", q.realLeaksFound, q.realLeaks)
	fmt.Fprintf(&b, "  false LEAK       %3d / %3d healthy\n", q.realFalse, q.realHealthy)
	for _, m := range q.realMissed {
		fmt.Fprintf(&b, "    missed: %s\n", m)
	}
	for _, m := range q.realFalseNames {
		fmt.Fprintf(&b, "    false:  %s\n", m)
	}

	bgs := backgrounds(real)
	cases, skipped := synthesize(bgs)
	q.skipped = skipped
	type cell struct{ n, hit, measured, within int }
	leakCells := map[string]map[string]*cell{}
	lookCells := map[string]*cell{}
	var classes []string
	// GROWTH_MISSES=1 prints every miss (and every figure off by more than
	// 10%) of the acceptance set and every false alarm, one line each:
	// the class, size, background, verdict, the model's reason and the
	// step-to-step changes in KiB (GROWTH_MISSES=d).
	dump := os.Getenv("GROWTH_MISSES")
	show := func(c synthCase, rep steplog.SeriesReport, what string) {
		if dump == "" {
			return
		}
		fmt.Printf("%s %s size %.1f steps %d start %d truth %.0f bg %q: %s %d (%s)\n", what, c.class, c.size, c.steps, c.start, c.truth, c.bg, rep.Verdict, rep.BytesPerStep, rep.Reason)
		if dump == "d" {
			var d []string
			recs := c.log.Series[0].Records
			for i := 1; i < len(recs); i++ {
				d = append(d, fmt.Sprintf("%.4g", float64(recs[i].AllocatedBytes-recs[i-1].AllocatedBytes)/1024))
			}
			fmt.Printf("  d(KiB)=%s\n", strings.Join(d, " "))
		}
		if dump == "y" {
			var v []string
			for _, r := range c.log.Series[0].Records {
				v = append(v, fmt.Sprint(r.RequestedBytes))
			}
			fmt.Printf("  y=%s\n", strings.Join(v, ","))
		}
	}
	q.bandFound, q.bandWithin10 = map[string]int{}, map[string]int{}
	for _, c := range cases {
		rep := verdict(c.log)
		found := rep.Verdict == steplog.VerdictGrowing
		if inAccept(c) && !found {
			show(c, rep, "MISS")
		} else if inAccept(c) && math.Abs(float64(rep.BytesPerStep)-c.truth) > 0.1*c.truth {
			show(c, rep, "OFF")
		}
		if !c.leak && found {
			show(c, rep, "FALSE")
		}
		if !c.leak {
			lc := lookCells[c.class]
			if lc == nil {
				lc = &cell{}
				lookCells[c.class] = lc
			}
			lc.n++
			q.lookalikes++
			if found {
				lc.hit++
				q.lookalikeFalse++
			}
			continue
		}
		row := leakCells[c.class]
		if row == nil {
			row = map[string]*cell{}
			leakCells[c.class] = row
			classes = append(classes, c.class)
		}
		band := sizeBand(c.size)
		ce := row[band]
		if ce == nil {
			ce = &cell{}
			row[band] = ce
		}
		ce.n++
		within := false
		if found {
			ce.hit++
			within = math.Abs(float64(rep.BytesPerStep)-c.truth) <= 0.1*c.truth
			if within {
				ce.within++
			}
		}
		if inAccept(c) {
			q.accept++
			if found {
				q.acceptFound++
				q.acceptMeasure++
				q.bandFound[band]++
				if within {
					q.acceptWithin10++
					q.bandWithin10[band]++
				}
			}
		}
	}
	slices.Sort(classes)
	fmt.Fprintf(&b, "SEMI-SYNTHETIC: %d backgrounds (real healthy series, requested and allocated; tileable ones also with +-2 MiB jitter), %d cases, %d background lengths skipped (a background that drifts is used at its own length only)\n", len(bgs), len(cases), skipped)
	bands := []string{"<2x", "2-5x", "5-20x", "20-50x"}
	// One table per figure: a class per row, a size band per column, each
	// cell the share num/den of its cases and den.
	table := func(title string, share func(ce *cell) (num, den int)) {
		fmt.Fprintf(&b, "  %s\n", title)
		fmt.Fprintf(&b, "  %-20s", "class")
		for _, bd := range bands {
			fmt.Fprintf(&b, " %14s", bd)
		}
		fmt.Fprintf(&b, "\n")
		for _, cl := range classes {
			fmt.Fprintf(&b, "  %-20s", cl)
			for _, bd := range bands {
				if ce := leakCells[cl][bd]; ce != nil {
					if num, den := share(ce); den > 0 {
						fmt.Fprintf(&b, " %6.1f%% (%4d)", 100*float64(num)/float64(den), den)
						continue
					}
				}
				fmt.Fprintf(&b, " %14s", "-")
			}
			fmt.Fprintf(&b, "\n")
		}
	}
	table("recall by class and size (bytes per step in step-noise sigmas; a staircase's is jump / period)", func(ce *cell) (int, int) { return ce.hit, ce.n })
	table("bytes/step within 10% of the truth, share of the detected", func(ce *cell) (int, int) { return ce.within, ce.hit })
	fmt.Fprintf(&b, "  acceptance set, bytes/step within 10%% by band:")
	for _, bd := range bands[1:] {
		fmt.Fprintf(&b, " %s %.1f%% (%d)", bd, pct(q.bandWithin10[bd], q.bandFound[bd]), q.bandFound[bd])
	}
	fmt.Fprintf(&b, "\n")
	fmt.Fprintf(&b, "  acceptance set (>=2x noise, >=12 steps; constant, late start, uneven, staircases): recall %.2f%% (%d/%d); bytes/step within 10%%: %.1f%% of detected\n",
		pct(q.acceptFound, q.accept), q.acceptFound, q.accept, pct(q.acceptWithin10, q.acceptMeasure))
	fmt.Fprintf(&b, "  false alarms on healthy look-alikes: %.2f%% (%d/%d)\n", pct(q.lookalikeFalse, q.lookalikes), q.lookalikeFalse, q.lookalikes)
	var lcs []string
	for k := range lookCells {
		lcs = append(lcs, k)
	}
	slices.Sort(lcs)
	for _, k := range lcs {
		fmt.Fprintf(&b, "    %-16s %6.2f%% (%d/%d)\n", k, pct(lookCells[k].hit, lookCells[k].n), lookCells[k].hit, lookCells[k].n)
	}
	q.table = b.String()
	return q
}

// inAccept: the acceptance set, leaks of at least 2x the step
// noise per step lasting at least 12 steps (constant, late start, uneven,
// staircases; accelerating ones are reported, not held).
func inAccept(c synthCase) bool {
	return c.leak && c.size >= 2 && c.steps >= 12 && c.class != "accelerating"
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// The figures the model holds on the corpus, the acceptance
// (#38): recall >= 99% on the acceptance set, false alarms <= 0.5% on
// look-alikes, bytes/step within 10% on >= 95% of the detected leaks in
// every size band of the acceptance set. Measured: recall 99.57%, false
// alarms 0.40%, within 10%: 98.2% / 98.7% / 99.0% (2-5x, 5-20x, 20-50x).
const (
	floorRecall    = 99.0
	ceilFalseAlarm = 0.5
	floorWithin10  = 95.0
)

// TestCorpusQuality prints the quality table (-v) and holds the figures:
// every real planted leak found, no real healthy log called growth, and
// the semi-synthetic floors above.
func TestCorpusQuality(t *testing.T) {
	q := measure(t)
	t.Log("\n" + q.table)
	if q.realLeaksFound != q.realLeaks {
		t.Errorf("real planted leaks: found %d of %d", q.realLeaksFound, q.realLeaks)
	}
	if q.realFalse != 0 {
		t.Errorf("real healthy recordings: %d false LEAK", q.realFalse)
	}
	if r := pct(q.acceptFound, q.accept); r < floorRecall {
		t.Errorf("semi-synthetic recall %.2f%% < %.1f%%", r, floorRecall)
	}
	if r := pct(q.lookalikeFalse, q.lookalikes); r > ceilFalseAlarm {
		t.Errorf("false alarms on look-alikes %.2f%% > %.1f%%", r, ceilFalseAlarm)
	}
	if r := pct(q.acceptWithin10, q.acceptMeasure); r < floorWithin10 {
		t.Errorf("bytes/step within 10%% on %.1f%% of detected leaks < %.0f%%", r, floorWithin10)
	}
	for _, bd := range []string{"2-5x", "5-20x", "20-50x"} {
		if q.bandFound[bd] == 0 {
			t.Errorf("no detected leak in the %s band", bd)
		} else if r := pct(q.bandWithin10[bd], q.bandFound[bd]); r < floorWithin10 {
			t.Errorf("bytes/step within 10%% on %.1f%% of detected %s leaks < %.0f%%", r, bd, floorWithin10)
		}
	}
}
