package rules

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/internal/testinput"
)

// Every rule must stay quiet (and not crash) on inputs of kinds it does
// not read: an input holds exactly one kind.
func TestEveryRuleToleratesEveryInputKind(t *testing.T) {
	inputs := []*Input{
		{Source: "empty"},
		{Source: "snapshot", Snapshot: testinput.NamedSnapshot(t, "leak_module_cache")},
		{Source: "steps", StepLog: &steplog.Log{}},
		{Source: "smi", SMI: &smi.Log{}},
	}
	for _, in := range inputs {
		for _, r := range Builtin() {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("rule %s panics on a %s input: %v", r.ID, in.Source, p)
					}
				}()
				Run([]Rule{r}, in)
			}()
		}
	}
}
