package rules

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
)

func TestSnapshotRules(t *testing.T) {
	in := &Input{Source: "frag", Snapshot: memtest.Decode(t, memtest.NamedSnapshot("frag_small_allocs"), snapshot.Read)}
	var ids []string
	for _, f := range Run(Builtin(), in) {
		ids = append(ids, f.Rule)
	}
	// 130 MiB of 510 MiB reserved is split free space: over the 20% default.
	if len(ids) != 1 || ids[0] != "snapshot.inactive-split" {
		t.Errorf("findings %v", ids)
	}
	in = &Input{Source: "leak", Snapshot: memtest.Decode(t, memtest.NamedSnapshot("leak_module_cache"), snapshot.Read)}
	fs := Run(Builtin(), in)
	if len(fs) == 0 || fs[0].Rule != "snapshot.leak" || fs[0].Location == nil || fs[0].Location.Line != 145 {
		t.Errorf("findings %+v", fs)
	}
}
