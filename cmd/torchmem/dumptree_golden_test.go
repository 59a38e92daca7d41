package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// Framework dump trees, read as they are: TorchTitan's
// (memory_snapshot/iteration_<N>/rank<R>_memory_snapshot.pickle beside
// profile_trace/iteration_<N>/rank<R>_trace.json) and torchtune's
// (iteration_<N>/rank<R>_memory_snapshot.pickle beside its traces), each
// recorded on the device with one rank leaking. `analyze` on the tree, in
// text and JSON, is kept as a golden: one run, one answer per rank, the
// cross-rank view naming the leaking rank.
func TestDumpTreeGoldens(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, tree := range []string{"titan_layout", "tune_layout"} {
		for _, format := range []string{formatText, formatJSON} {
			t.Run(tree+"/"+format, func(t *testing.T) {
				var truth struct {
					Rank int64 `json:"leaky_rank"`
				}
				memtest.ReadJSON(t, "testdata/gpu/round4/"+tree+"/truth.json", &truth)
				out, errOut, code := torchmemShared(t, "analyze", "--format", format, "testdata/gpu/round4/"+tree)
				if code != exitFindings {
					t.Fatalf("exit %d, want %d (the leaking rank): %s", code, exitFindings, errOut)
				}
				if format == formatJSON {
					var doc struct {
						SchemaVersion int `json:"schema_version"`
						CrossRank     *struct {
							Outliers []int64 `json:"outliers"`
						} `json:"cross_rank"`
					}
					decodeJSON(t, out, &doc)
					if doc.SchemaVersion != jsonSchemaVersion || doc.CrossRank == nil || !slices.Equal(doc.CrossRank.Outliers, []int64{truth.Rank}) {
						t.Errorf("schema %d, cross-rank %+v: want rank %d the one outlier", doc.SchemaVersion, doc.CrossRank, truth.Rank)
					}
				} else if !strings.Contains(out, "ACROSS RANKS") || !strings.Contains(out, fmt.Sprintf("LEAK: rank %d ", truth.Rank)) {
					t.Errorf("no cross-rank answer naming rank %d:\n%.2000s", truth.Rank, out)
				}
				ext := map[string]string{formatText: "txt", formatJSON: "json"}[format]
				checkGolden(t, "testdata/cmd/golden/dumptree/analyze_"+tree+"."+ext, out)
			})
		}
	}
}
