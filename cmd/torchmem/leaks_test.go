package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func TestLeaksExitCodesAndJSON(t *testing.T) {
	out, _, code := torchmem(t, "leaks", realTrace("leak_module_cache"), "--format", "json")
	if code != exitFindings {
		t.Errorf("leak: exit %d, want 1", code)
	}
	// One shape whatever the number of inputs: the file's report is
	// ranks[0].
	var doc struct {
		Verdicts []struct {
			Leak struct {
				Verdict string `json:"verdict"`
			} `json:"leak"`
		} `json:"verdicts"`
		Ranks []leakReportJSON `json:"ranks"`
	}
	decodeJSON(t, out, &doc)
	if len(doc.Ranks) != 1 || len(doc.Verdicts) != 1 || doc.Verdicts[0].Leak.Verdict != "leak" {
		t.Fatalf("%d reports, %d verdicts: %+v", len(doc.Ranks), len(doc.Verdicts), doc.Verdicts)
	}
	rep := doc.Ranks[0]
	if rep.Verdict != "leak" || rep.GrowthBytesPerStep != 4<<20 || len(rep.Steps) != 6 || len(rep.Suspects) == 0 {
		t.Errorf("report %+v", rep)
	}
	if _, _, code := torchmem(t, "leaks", realTrace("resnet_train_clean")); code != exitOK {
		t.Errorf("clean: exit %d", code)
	}
	// Nothing to measure memory by: bad input, as for check and analyze.
	refused(t, "profile_memory=True", "leaks", realTrace("no_memory"))
}

// leakReportJSON is the part of a leak report the tests read.
type leakReportJSON struct {
	Verdict            string `json:"verdict"`
	Reason             string `json:"reason"`
	GrowthBytesPerStep int64  `json:"growth_bytes_per_step"`
	Steps              []struct {
		Name           string `json:"name"`
		SurvivorBytes  int64  `json:"survivor_bytes"`
		SurvivorBlocks int64  `json:"survivor_blocks"`
	} `json:"steps"`
	Suspects []struct {
		BytesPerStep int64    `json:"bytes_per_step"`
		Blocks       int64    `json:"blocks"`
		Operator     string   `json:"operator"`
		Stack        []string `json:"stack"`
	} `json:"suspects"`
}

// A directory of per-rank traces: one verdict per rank, and the rank that
// differs is named.
func TestLeaksPerRankDirectory(t *testing.T) {
	t.Setenv("COLUMNS", "400") // content, not layout: wide enough that no line wraps
	dir := t.TempDir()
	link := func(src, name string) {
		data, err := os.ReadFile(realTrace(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link("resnet_train_clean", "host_rank0.pt.trace.json.gz")
	link("leak_module_cache", "host_rank1.pt.trace.json.gz")
	link("compiled_model", "host_rank2.pt.trace.json.gz")
	out, _, code := torchmem(t, "leaks", dir, "--format", "json")
	if code != exitFindings {
		t.Errorf("exit %d", code)
	}
	var doc struct {
		Ranks []struct {
			Rank    int64  `json:"rank"`
			Verdict string `json:"verdict"`
			Outlier bool   `json:"outlier"`
		} `json:"ranks"`
		CrossRank struct {
			Rows []struct {
				Rank    int64    `json:"rank"`
				Outlier bool     `json:"outlier"`
				Differs []string `json:"differs"`
			} `json:"ranks"`
		} `json:"cross_rank"`
	}
	decodeJSON(t, out, &doc)
	if len(doc.Ranks) != 3 || len(doc.CrossRank.Rows) != 3 {
		t.Fatalf("%d ranks, %d rows", len(doc.Ranks), len(doc.CrossRank.Rows))
	}
	// The three traces are of different models: their peaks differ too,
	// so every rank may be named; only rank 1 differs by its leak.
	outlier := map[int64]bool{}
	for _, r := range doc.CrossRank.Rows {
		outlier[r.Rank] = r.Outlier
		leaks := slices.ContainsFunc(r.Differs, func(d string) bool {
			return strings.HasPrefix(d, "leaks ") || strings.Contains(d, "where the others leak")
		})
		if (r.Rank == 1) != leaks {
			t.Errorf("row %+v", r)
		}
	}
	for _, r := range doc.Ranks {
		if (r.Rank == 1) != (r.Verdict == "leak") || r.Outlier != outlier[r.Rank] {
			t.Errorf("rank %+v", r)
		}
	}
	text, _, _ := torchmem(t, "leaks", dir)
	if !strings.Contains(text, "ACROSS RANKS") || !strings.Contains(text, "rank 1 (leaks 4.00 MB per step where the others do not") {
		t.Errorf("table does not name the odd rank:\n%s", text)
	}
}

// An OOM with no leak: one error (the trace's event and the snapshot's
// entry are one OOM), the exit every command gives, and leaks says why it
// exits 1 while its verdict is CLEAN; the OOM line names the leak that
// filled the memory when there is one.
func TestLeaksOnAnOOMSaysWhy(t *testing.T) {
	dir := memtest.Testdata("gpu", "alloc_retry_oom")
	_, errOut, code := torchmem(t, "leaks", dir)
	if code != exitFindings || !strings.Contains(errOut, "exit 1 without a leak: snapshot.oom") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	out, _, _ := torchmem(t, "check", dir, "--format", "json")
	var doc struct {
		Findings []struct {
			Rule string `json:"rule"`
		} `json:"findings"`
	}
	decodeJSON(t, out, &doc)
	n := 0
	for _, f := range doc.Findings {
		if f.Rule == "memory.oom" || f.Rule == "snapshot.oom" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d OOM findings, want one: %+v", n, doc.Findings)
	}
	out, _, _ = torchmem(t, "analyze", memtest.Testdata("gpu", "evidence", "oom_fraction"))
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "the chain: the leak at evidence_cases.py:353 (256.00 MB/step since step 2, 2.00 GB by step 9) filled the process's limit") {
		t.Errorf("no chain in:\n%s", out)
	}
}
