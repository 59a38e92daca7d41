package rules

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
)

// Config is the torchmem.yaml a project keeps beside its CI job:
//
//	rules:
//	  memory.leak:
//	    threshold: 2097152   # in the rule's unit (bytes_per_step)
//	    severity: error
//	  memory.top-ops-share:
//	    disabled: true
type Config struct {
	Rules map[string]RuleConfig `yaml:"rules"`
	// Diff holds `torchmem diff` budget conditions, same syntax as --fail-if.
	Diff struct {
		FailIf []string `yaml:"fail_if"`
	} `yaml:"diff"`
}

// RuleConfig overrides one rule's defaults.
type RuleConfig struct {
	Threshold *float64 `yaml:"threshold"`
	Severity  string   `yaml:"severity"`
	Disabled  bool     `yaml:"disabled"`
}

// ParseConfig reads a YAML config strictly: unknown keys are errors, so a
// typo cannot silently disable a gate.
func ParseConfig(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return &c, nil
	}
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("%s", firstYAMLLine(err.Error()))
	}
	return &c, nil
}

func firstYAMLLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Apply returns the rules with the config's overrides, without disabled
// ones. An id the config names but no rule has is an error.
func (c *Config) Apply(rs []Rule) ([]Rule, error) {
	if c == nil {
		return rs, nil
	}
	known := map[string]bool{}
	for _, r := range rs {
		known[r.ID] = true
	}
	for id := range c.Rules {
		if !known[id] {
			ids := make([]string, 0, len(known))
			for k := range known {
				ids = append(ids, k)
			}
			slices.Sort(ids)
			return nil, fmt.Errorf("unknown rule %q (known: %s)", id, strings.Join(ids, ", "))
		}
	}
	var out []Rule
	for _, r := range rs {
		rc, ok := c.Rules[r.ID]
		if ok {
			if rc.Disabled {
				continue
			}
			if rc.Threshold != nil {
				r.Threshold = *rc.Threshold
			}
			if rc.Severity != "" {
				s, err := ParseSeverity(rc.Severity)
				if err != nil {
					return nil, fmt.Errorf("rule %s: %w", r.ID, err)
				}
				r.Severity = s
			}
		}
		out = append(out, r)
	}
	return out, nil
}
