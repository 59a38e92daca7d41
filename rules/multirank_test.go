package rules

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/leak"
)

// multirankTruth is what ddp_gloo_ranks.py planted (testdata/gpu/multirank).
type multirankTruth struct {
	WorldSize        int              `json:"world_size"`
	LeakyRank        *int64           `json:"leaky_rank"`
	LeakBytesPerStep map[string]int64 `json:"leak_bytes_per_step"` // by rank
	LeakSite         *struct {
		File string `json:"file"`
		Line int    `json:"line"`
	} `json:"leak_site"`
}

// Real multi-rank runs recorded with the snippet (torchrun, gloo, one GPU):
// every rank's trace, snapshot and steps log is read and judged on its own,
// the leaking rank alone is named across ranks, with its bytes per step and
// its line, and a clean job of 8 ranks names none.
func TestRealMultiRankRecordings(t *testing.T) {
	for _, run := range []string{"ddp4_leak", "ddp8_clean", "fsdp2_leak"} {
		t.Run(run, func(t *testing.T) {
			dir := memtest.Testdata("gpu", "multirank", run)
			var truth multirankTruth
			memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, e := range entries {
				if n := e.Name(); strings.Contains(n, ".pt.trace.json") || strings.Contains(n, ".pickle") || strings.HasSuffix(n, ".steps.jsonl") {
					paths = append(paths, filepath.Join(dir, n))
				}
			}
			if len(paths) != 3*truth.WorldSize {
				t.Fatalf("%d files for %d ranks", len(paths), truth.WorldSize)
			}
			ins := loadInputs(t, paths...)
			groups := groupInputs(ins)
			if len(groups) != truth.WorldSize {
				t.Fatalf("%d groups, want one per rank (%d)", len(groups), truth.WorldSize)
			}
			for i, g := range groups {
				if g.Rank != int64(i) || len(g.Inputs) != 3 {
					t.Errorf("group %d: rank %d with %d inputs, want rank %d with its trace, snapshot and steps log", i, g.Rank, len(g.Inputs), i)
				}
			}
			vs := judgeAll(ins)
			if len(vs) != truth.WorldSize {
				t.Fatalf("%d verdicts for %d ranks", len(vs), truth.WorldSize)
			}
			for _, v := range vs {
				leaky := truth.LeakyRank != nil && v.Rank == *truth.LeakyRank
				perStep := truth.LeakBytesPerStep[strconv.FormatInt(v.Rank, 10)]
				switch {
				case leaky && (v.Leak.Verdict != leak.VerdictLeak || v.Leak.BytesPerStep != perStep):
					t.Errorf("rank %d: %s %d B/step, want a leak of %d", v.Rank, v.Leak.Verdict, v.Leak.BytesPerStep, perStep)
				case leaky && (v.Leak.Location == nil || v.Leak.Location.File != truth.LeakSite.File || v.Leak.Location.Line != truth.LeakSite.Line):
					t.Errorf("rank %d: leak at %v, want %s:%d", v.Rank, v.Leak.Location, truth.LeakSite.File, truth.LeakSite.Line)
				case !leaky && v.Leak.Verdict != leak.VerdictClean:
					t.Errorf("rank %d: %s, want clean", v.Rank, v.Leak.Verdict)
				}
				if v.Peak == nil || v.Peak.AllocatedBytes <= 0 {
					t.Errorf("rank %d: no peak", v.Rank)
				}
			}
			cr := CompareRanks(vs)
			if cr == nil || len(cr.Rows) != truth.WorldSize {
				t.Fatalf("cross-rank view %+v", cr)
			}
			var want []int64
			if truth.LeakyRank != nil {
				want = []int64{*truth.LeakyRank}
			}
			if !slices.Equal(cr.Outliers, want) {
				t.Errorf("outliers %v, want %v (%s)", cr.Outliers, want, cr.Headline)
			}
		})
	}
}
