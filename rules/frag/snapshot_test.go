package frag_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/frag"
)

// Each recording's snapshot is dumped at the end of the run, beside
// torch.cuda.memory_stats() of the same moment: split free space and
// reserved bytes per pool must match torch's own counters.
func TestSnapshotPoolsMatchMemoryStats(t *testing.T) {
	dirs, _ := filepath.Glob(memtest.Testdata("gpu", "*"))
	n := 0
	for _, d := range dirs {
		snaps, _ := filepath.Glob(filepath.Join(d, "*.snapshot.pickle.gz"))
		data, err := os.ReadFile(filepath.Join(d, "memory_stats.json"))
		if len(snaps) != 1 || err != nil {
			continue
		}
		var stats map[string]float64
		if err := json.Unmarshal(data, &stats); err != nil {
			t.Fatal(err)
		}
		n++
		t.Run(filepath.Base(d), func(t *testing.T) {
			in := &rules.Input{Source: snaps[0], Snapshot: memtest.Decode(t, snaps[0], snapshot.Read)}
			got := map[string][2]int64{}
			for _, p := range frag.SnapshotPools(in.SnapshotReport()) {
				g := got[p.Pool]
				got[p.Pool] = [2]int64{g[0] + p.InactiveSplitBytes, g[1] + p.ReservedBytes}
			}
			st := in.SnapshotReport().Stats
			if st.ReservedBytes != int64(stats["reserved_bytes.all.current"]) || st.AllocatedBytes != int64(stats["allocated_bytes.all.current"]) {
				// memory_stats.json was taken after the snapshot was dumped
				// and something was freed in between (lightning_leak: the
				// trainer's teardown; two_streams: the prefetched batch).
				// The steps log's last line, written after the last step,
				// may be of the snapshot's moment: then its all-pool
				// figures must match.
				logs, _ := filepath.Glob(filepath.Join(d, "*.steps.jsonl"))
				var last map[string]float64
				if len(logs) == 1 {
					lines := readStepStats(t, logs[0])
					for k, l := range lines {
						if last == nil || l["step"] > last["step"] {
							last = lines[k]
						}
					}
				}
				if last == nil || int64(last["reserved_bytes.all.current"]) != st.ReservedBytes || int64(last["allocated_bytes.all.current"]) != st.AllocatedBytes {
					t.Skipf("memory_stats.json (%v reserved, %v allocated) is not of the snapshot's moment (%d, %d), nor the steps log's last line",
						stats["reserved_bytes.all.current"], stats["allocated_bytes.all.current"], st.ReservedBytes, st.AllocatedBytes)
				}
				if split := got[frag.PoolSmall][0] + got[frag.PoolLarge][0]; split != int64(last["inactive_split_bytes.all.current"]) {
					t.Errorf("split %d in all pools, steps log's last line %v", split, last["inactive_split_bytes.all.current"])
				}
				return
			}
			for _, pool := range []string{frag.PoolSmall, frag.PoolLarge} {
				split, reserved := stats["inactive_split_bytes."+pool+"_pool.current"], stats["reserved_bytes."+pool+"_pool.current"]
				if got[pool][0] != int64(split) || got[pool][1] != int64(reserved) {
					t.Errorf("%s pool: split %d reserved %d, memory_stats %v and %v", pool, got[pool][0], got[pool][1], split, reserved)
				}
			}
		})
	}
	if n < 8 {
		t.Errorf("only %d recordings with a snapshot and memory_stats", n)
	}
}
