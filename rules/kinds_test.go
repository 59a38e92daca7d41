package rules

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// Every rule must stay quiet (and not crash) on inputs of kinds it does
// not read: an input holds exactly one kind.
func TestEveryRuleToleratesEveryInputKind(t *testing.T) {
	inputs := []*Input{
		{Source: "empty"},
		{Source: "snapshot", Snapshot: memtest.Decode(t, memtest.NamedSnapshot("leak_module_cache"), snapshot.Read)},
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
