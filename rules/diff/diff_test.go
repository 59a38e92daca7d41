package diff_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/diff"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

func TestParseBudget(t *testing.T) {
	good := map[string]diff.Budget{
		"peak_allocated>+5%":       {Metric: "peak_allocated", Relative: true, Value: 5},
		"peak_reserved > +512MiB":  {Metric: "peak_reserved", Increase: true, Value: 512 << 20},
		"growth_per_step>1MiB":     {Metric: "growth_per_step", Value: 1 << 20},
		"new_suspects>0":           {Metric: "new_suspects", Value: 0},
		"peak_allocated>+1.5GiB":   {Metric: "peak_allocated", Increase: true, Value: 1.5 * (1 << 30)},
		"peak_allocated>100000000": {Metric: "peak_allocated", Value: 1e8},
	}
	for s, want := range good {
		b, err := diff.ParseBudget(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		b.Text = ""
		if b != want {
			t.Errorf("%q: got %+v, want %+v", s, b, want)
		}
	}
	for _, s := range []string{"peak>5%", "peak_allocated>5%", "peak_allocated<+5%", "peak_allocated>+5 parsecs", ""} {
		if _, err := diff.ParseBudget(s); err == nil {
			t.Errorf("accepted %q", s)
		}
	}
}

func TestDiffSelfIsNoChange(t *testing.T) {
	tr := memtest.NamedTrace(t, "resnet_train_clean")
	a, b := rules.NewTraceSide("a", tr), rules.NewTraceSide("b", tr)
	d := diff.Compare(a, b, 10)
	if d.Changed || len(d.Operators) != 0 || len(d.SitesAlloc) != 0 || len(d.NewSuspects) != 0 {
		t.Errorf("self diff changed: %+v", d)
	}
	for _, c := range []string{"peak_allocated>+0%", "peak_reserved>+0B", "new_suspects>0"} {
		bud, _ := diff.ParseBudget(c)
		if over, why := bud.Exceeded(d); over {
			t.Errorf("%s exceeded by a self diff: %s", c, why)
		}
	}
}

// A leaking run against a clean one: the new suspect is the planted line
// and the live-at-end mover is its 24 MiB.
func TestDiffFindsNewLeak(t *testing.T) {
	d := diff.Compare(rules.NewTraceSide("base", memtest.NamedTrace(t, "compiled_model")), rules.NewTraceSide("head", memtest.NamedTrace(t, "leak_module_cache")), 20)
	if len(d.NewSuspects) != 1 || site.Label(d.NewSuspects[0].Stack, d.NewSuspects[0].Operator) != "gen_traces.py(143): forward via aten::clone" {
		t.Errorf("new suspects %+v", d.NewSuspects)
	}
	found := false
	for _, m := range d.SitesLive {
		if m.Name == "gen_traces.py(143): forward via aten::clone" && m.Delta == 24<<20 {
			found = true
		}
	}
	if !found {
		t.Errorf("live movers %+v", d.SitesLive)
	}
	bud, _ := diff.ParseBudget("growth_per_step>+1MiB")
	if over, _ := bud.Exceeded(d); !over {
		t.Error("4 MiB/step growth within a 1 MiB budget")
	}
}

// The leak gate fails on a new leak without flags, on a new suspect when
// both sides leak (at or above the threshold), and never on a fixed leak,
// a clean change or a self diff. Real recordings only.
func TestDiffLeakGate(t *testing.T) {
	side := func(name string) *diff.Side {
		if strings.HasPrefix(name, "gpu/") {
			return rules.NewTraceSide(name, memtest.GPUTrace(t, strings.TrimPrefix(name, "gpu/")))
		}
		return rules.NewTraceSide(name, memtest.NamedTrace(t, name))
	}
	cases := []struct {
		base, head string
		threshold  int64
		want       string // substring of the first reason; "" passes
	}{
		{"gpu/diff_pair/base", "gpu/diff_pair/head_leak", 1 << 20, "HEAD leaks 4.00 MB per step at diff_train.py(35): forward via aten::clone (BASE clean)"},
		{"compiled_model", "leak_module_cache", 1 << 20, "HEAD leaks 4.00 MB per step at gen_traces.py(143)"},
		// Both leak: the new site fails at a 1 MiB threshold, not at 8 MiB.
		{"leak_module_cache", "gpu/diff_pair/head_leak", 1 << 20, "new leak suspect in HEAD: 4.00 MB per step at diff_train.py(35)"},
		{"leak_module_cache", "gpu/diff_pair/head_leak", 8 << 20, ""},
		{"leak_module_cache", "compiled_model", 1 << 20, ""},
		{"gpu/diff_pair/base", "gpu/diff_pair/head", 1 << 20, ""},
		{"leak_module_cache", "leak_module_cache", 1 << 20, ""},
	}
	for _, c := range cases {
		got := diff.Compare(side(c.base), side(c.head), 10).LeakGate(c.threshold)
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s -> %s: gate failed: %q", c.base, c.head, got)
		case c.want != "" && (len(got) == 0 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s -> %s: got %q, want %q", c.base, c.head, got, c.want)
		}
	}
}

// The recorded before/after pair: HEAD doubles fc1's width. The diff
// names the operators and the line whose bytes moved, by the right amount
// per step (fc1's output: 4 MiB -> 8 MiB per step).
func TestDiffOnRecordedPair(t *testing.T) {
	var truth struct {
		HeadVsBase struct {
			FC1 struct{ Base, Head int64 } `json:"fc1_output_bytes"`
		} `json:"head_vs_base"`
		HeadLeakVsBase struct {
			LeakBytesPerStep int64 `json:"leak_bytes_per_step"`
		} `json:"head_leak_vs_base"`
	}
	data, _ := os.ReadFile(memtest.Testdata("gpu", "diff_pair", "truth.json"))
	if err := json.Unmarshal(data, &truth); err != nil {
		t.Fatal(err)
	}
	want := truth.HeadVsBase.FC1.Head - truth.HeadVsBase.FC1.Base
	base := rules.NewTraceSide("base", memtest.GPUTrace(t, "diff_pair/base"))
	d := diff.Compare(base, rules.NewTraceSide("head", memtest.GPUTrace(t, "diff_pair/head")), 0)
	found := map[string]int64{}
	for _, m := range d.Operators {
		found["op "+m.Name] = m.DeltaPerStep
	}
	for _, m := range d.SitesAlloc {
		found["site "+m.Name] = m.DeltaPerStep
	}
	for _, k := range []string{"op aten::addmm", "op aten::clamp_min", "site diff_train.py(35): forward via aten::relu"} {
		if found[k] != want {
			t.Errorf("%s moved %d bytes/step, fc1's output grew %d", k, found[k], want)
		}
	}
	if len(d.NewSuspects) != 0 || d.HeadVerdict != leak.VerdictClean {
		t.Errorf("a wider layer is not a leak: %+v", d.NewSuspects)
	}
	d = diff.Compare(base, rules.NewTraceSide("head_leak", memtest.GPUTrace(t, "diff_pair/head_leak")), 0)
	if len(d.NewSuspects) != 1 || d.NewSuspects[0].BytesPerStep != truth.HeadLeakVsBase.LeakBytesPerStep ||
		site.Label(d.NewSuspects[0].Stack, d.NewSuspects[0].Operator) != "diff_train.py(35): forward via aten::clone" {
		t.Errorf("new suspects %+v", d.NewSuspects)
	}
	self := diff.Compare(base, rules.NewTraceSide("base again", memtest.GPUTrace(t, "diff_pair/base")), 0)
	if self.Changed {
		t.Error("a run diffed with itself changed")
	}
}
