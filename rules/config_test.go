package rules

import (
	"strings"
	"testing"
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
	var leak []Rule
	for _, r := range rs {
		if r.ID == "memory.leak" {
			r.Severity = Error
			leak = append(leak, r)
		}
	}
	fs := Run(leak, &Input{Trace: readTrace(t, "leak_module_cache")})
	if len(fs) != 1 || fs[0].Severity != Warning {
		t.Errorf("threshold override ignored: %+v", fs)
	}
	leak[0].Threshold = 4 << 20
	if fs := Run(leak, &Input{Trace: readTrace(t, "leak_module_cache")}); len(fs) != 1 || fs[0].Severity != Error {
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
