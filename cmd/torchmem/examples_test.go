package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/diff"
)

// The example config in examples/ci must stay valid as rules evolve.
func TestExampleConfigIsValid(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "examples", "ci", "torchmem.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := rules.ParseConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Apply(rules.Builtin()); err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Diff.FailIf {
		if _, err := diff.ParseBudget(c); err != nil {
			t.Error(err)
		}
	}
}
