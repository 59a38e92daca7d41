package snapshot

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// A snapshot of the schema older torch wrote (no allocator_settings, no
// requested_size, no history; older_schema.pickle.gz is a real snapshot cut
// down to those fields, see make_older_schema.py): what it records is read
// as before, what it does not is marked unrecorded, not filled with zeros.
func TestOlderSnapshotSchema(t *testing.T) {
	read := func(name string) *Report {
		s := memtest.Decode(t, memtest.Testdata("snapshots", name), Read)
		return Analyze(s, 0)
	}
	old, full := read("older_schema.pickle.gz"), read("leak_module_cache.pickle.gz")
	if len(old.Settings.Recorded) != 0 || old.Settings.Recorded == nil || old.Settings.Has("expandable_segments") {
		t.Errorf("older schema: settings recorded %q", old.Settings.Recorded)
	}
	if !full.Settings.Has("PYTORCH_CUDA_ALLOC_CONF") || !full.Settings.Has("max_split_size") || !full.Settings.Has("expandable_segments") {
		t.Errorf("torch 2.11 snapshot: settings recorded %q", full.Settings.Recorded)
	}
	if !old.Stats.RequestedNotRecorded || full.Stats.RequestedNotRecorded {
		t.Errorf("requested not recorded: older %v, 2.11 %v", old.Stats.RequestedNotRecorded, full.Stats.RequestedNotRecorded)
	}
	// The figures the older schema does record are the same as the full
	// snapshot's.
	o, f := old.Stats, full.Stats
	if o.ReservedBytes != f.ReservedBytes || o.AllocatedBytes != f.AllocatedBytes || o.InactiveSplitBytes != f.InactiveSplitBytes || o.LargestFreeBlock != f.LargestFreeBlock {
		t.Errorf("older %+v\n2.11 %+v", o, f)
	}
	if len(old.TraceEntries) != 0 {
		t.Errorf("history %v", old.TraceEntries)
	}
}
