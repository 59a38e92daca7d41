package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"

	"github.com/torchmem/torchmem/memtimeline"
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
	Threshold *Threshold `yaml:"threshold"`
	Severity  string     `yaml:"severity"`
	Disabled  bool       `yaml:"disabled"`
}

// Threshold is a rule's threshold as a config writes it: a number in the
// rule's unit, or for a rule in bytes a size in the one size syntax
// ("2MiB", "512KiB", "1.5GB": memtimeline.ParseBytes).
type Threshold struct {
	Value float64
	// Size is the text when it was written as a size with a unit.
	Size string
}

// UnmarshalYAML reads a number, or a size string.
func (t *Threshold) UnmarshalYAML(unmarshal func(any) error) error {
	var v float64
	if err := unmarshal(&v); err == nil {
		t.Value, t.Size = v, ""
		return nil
	}
	var s string
	if err := unmarshal(&s); err != nil {
		return errors.New("threshold: want a number, or a size such as 2MiB")
	}
	n, err := memtimeline.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("threshold: %w", err)
	}
	t.Value, t.Size = float64(n), s
	return nil
}

// Bounds on a config file. A real torchmem.yaml is a few hundred bytes and
// three levels deep; these leave plenty of room and keep a hostile file
// (an alias bomb, 100,000 nested lists, /dev/zero) from costing more than
// a moment: the YAML decoder's time and memory grow with what it expands.
const (
	maxConfigBytes   = 64 << 10
	maxConfigDepth   = 4    // nested [ ] and { }; a config needs 3 at most
	maxConfigTokens  = 8192 // a real config has about a hundred
	maxConfigColumn  = 200  // where a key or "- " may start: bounds block nesting
	maxConfigFailIfs = 1000
)

// ParseConfig reads a YAML config strictly: unknown keys are errors, so a
// typo cannot silently disable a gate. It reads at most maxConfigBytes and
// refuses anchors, aliases and merge keys (a config never needs them, and
// they are how a small file expands into a huge one), nesting deeper than
// any config has, and thresholds that are not finite numbers.
func ParseConfig(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("larger than %d bytes: not a torchmem config", maxConfigBytes)
	}
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return &c, nil
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, errors.New("binary data (a NUL byte): not a YAML config")
	}
	if err := checkConfigTokens(string(data)); err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("%s", firstYAMLLine(err.Error()))
	}
	if len(c.Diff.FailIf) > maxConfigFailIfs {
		return nil, fmt.Errorf("diff.fail_if has %d conditions (at most %d)", len(c.Diff.FailIf), maxConfigFailIfs)
	}
	for id, rc := range c.Rules {
		if rc.Threshold != nil && (math.IsNaN(rc.Threshold.Value) || math.IsInf(rc.Threshold.Value, 0)) {
			return nil, fmt.Errorf("rule %s: threshold %v is not a finite number", id, rc.Threshold.Value)
		}
	}
	return &c, nil
}

// checkConfigTokens refuses what no config needs and a hostile one uses:
// anchors, aliases, merge keys, deep flow nesting and block nesting (keys
// or list entries far to the right). The lexer is linear in the input.
func checkConfigTokens(src string) error {
	depth := 0
	tokens := lexer.Tokenize(src)
	if len(tokens) > maxConfigTokens {
		return fmt.Errorf("%d YAML tokens (at most %d): not a torchmem config", len(tokens), maxConfigTokens)
	}
	for _, tk := range tokens {
		line := 0
		if tk.Position != nil {
			line = tk.Position.Line
		}
		switch tk.Type {
		case token.AnchorType, token.AliasType, token.MergeKeyType:
			return fmt.Errorf("line %d: YAML anchors, aliases and merge keys (&, *, <<) are not allowed in a torchmem config", line)
		case token.SequenceStartType, token.MappingStartType:
			if depth++; depth > maxConfigDepth {
				return fmt.Errorf("line %d: nested more than %d levels deep: not a torchmem config", line, maxConfigDepth)
			}
		case token.SequenceEndType, token.MappingEndType:
			depth--
		case token.SequenceEntryType, token.MappingKeyType, token.MappingValueType:
			if tk.Position != nil && tk.Position.Column > maxConfigColumn {
				return fmt.Errorf("line %d: nested too deep (column %d): not a torchmem config", line, tk.Position.Column)
			}
		case token.InvalidType:
			return fmt.Errorf("line %d: invalid YAML: %s", line, tk.Error)
		}
	}
	return nil
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
				if rc.Threshold.Size != "" && !strings.HasPrefix(r.Unit, "bytes") {
					return nil, fmt.Errorf("rule %s: threshold %q is a size, but the rule counts %s", r.ID, rc.Threshold.Size, r.Unit)
				}
				if err := checkThreshold(r, rc.Threshold.Value); err != nil {
					return nil, err
				}
				r.Threshold = rc.Threshold.Value
			}
			if rc.Severity != "" {
				s, err := parseSeverity(rc.Severity)
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

// checkThreshold keeps a configured threshold within what the rule's unit
// can mean: fractions in [0, 1], percentages in [0, 100], byte and event
// counts in [0, 2^53] (exact as a float64, and far beyond any GPU).
func checkThreshold(r Rule, v float64) error {
	lo, hi := 0.0, float64(1<<53)
	switch {
	case strings.HasPrefix(r.Unit, "fraction"):
		hi = 1
	case strings.HasPrefix(r.Unit, "percent"):
		hi = 100
	}
	if math.IsNaN(v) || v < lo || v > hi {
		return fmt.Errorf("rule %s: threshold %v out of range [%v, %v] (%s)", r.ID, v, lo, hi, r.Unit)
	}
	return nil
}
