package rules

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func TestConfigOverridesAndDisables(t *testing.T) {
	c, err := ParseConfig(strings.NewReader(`
rules:
  memory.leak:
    threshold: 8388608
    severity: warning
  memory.top-ops-share:
    disabled: true
`))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.Apply(Builtin())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		switch r.ID {
		case "memory.leak":
			if r.Threshold != 8<<20 || r.Severity != Warning {
				t.Errorf("leak rule %+v", r)
			}
		case "memory.top-ops-share":
			t.Error("disabled rule still present")
		}
	}
	// The override is what the rule uses: 8 MiB/step is above the planted
	// 4 MiB, so the leak is still found but only as a warning.
	var leakRules []Rule
	for _, r := range rs {
		if r.ID == "memory.leak" {
			r.Severity = Error
			leakRules = append(leakRules, r)
		}
	}
	fs := Run(leakRules, &Input{Trace: memtest.NamedTrace(t, "leak_module_cache")})
	if len(fs) != 1 || fs[0].Severity != Warning {
		t.Errorf("threshold override ignored: %+v", fs)
	}
	leakRules[0].Threshold = 4 << 20
	if fs := Run(leakRules, &Input{Trace: memtest.NamedTrace(t, "leak_module_cache")}); len(fs) != 1 || fs[0].Severity != Error {
		t.Errorf("at the threshold the leak is an error: %+v", fs)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, bad := range []string{
		"rules:\n  memory.nope:\n    threshold: 1\n",
		"rules:\n  memory.leak:\n    treshold: 1\n",
		"rules:\n  memory.leak:\n    severity: fatal\n",
		"rules: [1, 2\n",
	} {
		c, err := ParseConfig(strings.NewReader(bad))
		if err == nil {
			_, err = c.Apply(Builtin())
		}
		if err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// An analysis may use Memo for another key while being computed.
func TestMemoNests(t *testing.T) {
	in := &Input{}
	got := Memo(in, "outer", func() int { return Memo(in, "inner", func() int { return 41 }) + 1 })
	if got != 42 || Memo(in, "outer", func() int { return 0 }) != 42 {
		t.Errorf("got %d", got)
	}
}

// endless yields zero bytes forever, like /dev/zero.
type endless struct{ b byte }

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.b
	}
	return len(p), nil
}

// aliasBomb is a "billion laughs" YAML of about 600 bytes whose expansion,
// referenced from diff.fail_if, would be 9^9 strings.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString(`x0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i := 1; i < 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ",")
		fmt.Fprintf(&b, "x%d: &a%d [%s]\n", i, i, refs)
	}
	b.WriteString("diff:\n  fail_if: *a8\n")
	return b.String()
}

func TestConfigHostile(t *testing.T) {
	cases := []struct {
		name string
		r    io.Reader
		want string // in the error
	}{
		{"/dev/zero", endless{0}, "larger than"},
		{"endless spaces", endless{' '}, "larger than"},
		{"NUL bytes", strings.NewReader("rules:\x00\n"), "binary"},
		{"alias bomb", strings.NewReader(aliasBomb()), "aliases"},
		{"anchor", strings.NewReader("rules:\n  memory.leak: &x\n    threshold: 1\n"), "anchors"},
		{"merge key", strings.NewReader("rules:\n  memory.leak:\n    <<: {threshold: 1}\n"), "merge"},
		{"100,000 nested lists", strings.NewReader("diff:\n  fail_if: " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n"), "larger than"},
		{"5 nested lists", strings.NewReader("diff:\n  fail_if: [[[[[1]]]]]\n"), "nested more than"},
		{"nested maps", strings.NewReader("rules: " + strings.Repeat("{a: ", 5) + "1" + strings.Repeat("}", 5) + "\n"), "nested more than"},
		{"block lists far right", strings.NewReader("diff:\n  fail_if:\n    " + strings.Repeat("- ", 150) + "x\n"), "nested too deep"},
		{"20,000 nested block lists", strings.NewReader("diff:\n  fail_if:\n    " + strings.Repeat("- ", 20_000) + "x\n"), "tokens"},
		{"NaN", strings.NewReader("rules:\n  memory.leak:\n    threshold: .nan\n"), "finite"},
		{"-inf", strings.NewReader("rules:\n  memory.leak:\n    threshold: -.inf\n"), "finite"},
		{"+inf", strings.NewReader("rules:\n  memory.leak:\n    threshold: .inf\n"), "finite"},
		{"negative", strings.NewReader("rules:\n  memory.leak:\n    threshold: -1\n"), "out of range"},
		{"fraction above 1", strings.NewReader("rules:\n  memory.top-ops-share:\n    threshold: 1.5\n"), "out of range"},
		{"too many fail_if", strings.NewReader("diff:\n  fail_if: [" + strings.Repeat(`"p",`, 1500) + "]\n"), "conditions"},
	}
	for _, c := range cases {
		cfg, err := ParseConfig(c.r)
		if err == nil {
			_, err = cfg.Apply(Builtin())
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// What the bounds refuse is never in a real config: quoted '&' and '*'
// are text, and the example config in the README's shape still parses.
func TestConfigBoundsKeepRealConfigs(t *testing.T) {
	c, err := ParseConfig(strings.NewReader(`# torchmem.yaml
rules:
  memory.leak:
    threshold: 2097152
    severity: error
  memory.top-ops-share: {threshold: 0.9, severity: warning}
diff:
  fail_if:
    - "peak_allocated>+5%"
    - 'reserved > +10%  # not & an anchor, not * an alias'
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(Builtin()); err != nil {
		t.Fatal(err)
	}
	if len(c.Diff.FailIf) != 2 || !strings.Contains(c.Diff.FailIf[1], "& an anchor") {
		t.Errorf("fail_if %q", c.Diff.FailIf)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"rules:\n  memory.leak:\n    threshold: 8388608\n    severity: warning\n",
		"rules:\n  memory.top-ops-share:\n    disabled: true\n",
		"diff:\n  fail_if: [\"peak_allocated>+5%\"]\n",
		aliasBomb(), "rules: [1, 2\n", "a: &x 1\nb: *x\n", "rules: {memory.leak: {threshold: .nan}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(bytes.NewReader(data))
		if err != nil {
			return
		}
		rs, err := c.Apply(Builtin())
		if err != nil {
			return
		}
		for _, r := range rs {
			if math.IsNaN(r.Threshold) || math.IsInf(r.Threshold, 0) || r.Threshold < 0 {
				t.Fatalf("rule %s accepted threshold %v", r.ID, r.Threshold)
			}
		}
	})
}

// Sizes in a rules file read like sizes everywhere else: "2MiB" for a
// rule in bytes; a size for a rule that counts something else is refused.
func TestConfigThresholdSizes(t *testing.T) {
	for text, want := range map[string]float64{"2MiB": 2 << 20, "512KiB": 512 << 10, "1.5GB": 3 << 29, "2097152": 2 << 20, "\"2097152\"": 2 << 20} {
		c, err := ParseConfig(strings.NewReader("rules:\n  memory.leak:\n    threshold: " + text + "\n  memory.op-self-limit:\n    threshold: " + text + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		rs, err := NewRuleSet(c)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if r := rs.Rule("memory.leak"); r.Threshold != want {
			t.Errorf("%s: threshold %v, want %v", text, r.Threshold, want)
		}
	}
	for _, bad := range []string{"rules:\n  memory.leak:\n    threshold: 2 parsecs\n", "rules:\n  snapshot.inactive-split:\n    threshold: 2MiB\n"} {
		c, err := ParseConfig(strings.NewReader(bad))
		if err == nil {
			_, err = NewRuleSet(c)
		}
		if err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
