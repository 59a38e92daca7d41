package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/rules"
)

// ruleInput makes every input through rules.NewInput: the kind is the
// data's, a memory_summary() log also reads as steps, and a file that
// holds nothing or two kinds at once is bad input naming the file.
func TestRuleInputKindAndRefusals(t *testing.T) {
	t.Parallel()
	in, err := ruleInput(&load.File{Path: "train.log", Kind: load.Summary, Rank: 2, Summary: &memsummary.Log{}})
	if err != nil || in.Kind != rules.SourceMemSummary || in.StepLog == nil || in.Rank != 2 {
		t.Fatalf("memory_summary() input: %v %+v", err, in)
	}
	for _, f := range []*load.File{
		{Path: "empty.csv", Kind: load.SMI, Rank: -1},
		{Path: "both.csv", Kind: load.SMI, Rank: -1, SMI: &smi.Log{}, SMIApps: &smi.AppsLog{}},
	} {
		_, err := ruleInput(f)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitBadInput || !strings.Contains(err.Error(), f.Path) {
			t.Errorf("%s: %v, want exit %d naming the file", f.Path, err, exitBadInput)
		}
	}
}
