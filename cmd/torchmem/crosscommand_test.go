package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The cross-command test: every command in every format on the recorded
// runs says the same thing (issue #39). The run folders are testdata's
// folders with a truth.json; they are run in parallel, each once per
// command, so the test stays a few seconds of CPU per run.

// runFolders are testdata's run folders (a truth.json beside the files),
// named as memtest.Testdata names them: the other tests that ask for a
// folder's JSON (torchmemShared) then share its evaluation.
func runFolders(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(memtest.Testdata(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "truth.json" {
			out = append(out, filepath.Dir(p))
		}
		return nil
	})
	if err != nil || len(out) < 20 {
		t.Fatalf("%d run folders (%v)", len(out), err)
	}
	slices.Sort(out)
	return out
}

// testdataName is path's name under testdata/ (a subtest's name).
func testdataName(path string) string {
	rel, err := filepath.Rel(memtest.Testdata(), path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

// runAnswer is what a command concluded of one run and rank: the figures
// every answering command must agree on.
type runAnswer struct {
	Name         string
	Leak         string
	BytesPerStep int64
	Peak         int64
	OOMs         int
}

func answersOf(t *testing.T, what, out string) []runAnswer {
	t.Helper()
	var doc struct {
		Verdicts []struct {
			Name string `json:"name"`
			Leak struct {
				Verdict      string `json:"verdict"`
				BytesPerStep int64  `json:"bytes_per_step"`
			} `json:"leak"`
			OOMs []json.RawMessage `json:"ooms"`
			Peak *struct {
				AllocatedBytes int64 `json:"allocated_bytes"`
			} `json:"peak"`
		} `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%s: not JSON: %v\n%.300s", what, err, out)
	}
	var as []runAnswer
	for _, v := range doc.Verdicts {
		a := runAnswer{Name: v.Name, Leak: v.Leak.Verdict, BytesPerStep: v.Leak.BytesPerStep, OOMs: len(v.OOMs), Peak: -1}
		if v.Peak != nil {
			a.Peak = v.Peak.AllocatedBytes
		}
		as = append(as, a)
	}
	return as
}

// analyze, check and leaks give every run folder one runAnswer (the same
// verdicts, bytes per step, peak and OOM count) and one exit code; a
// steps log alone says in steps what analyze says of it.
func TestEveryCommandAgrees(t *testing.T) {
	for _, dir := range runFolders(t) {
		t.Run(testdataName(dir), func(t *testing.T) {
			t.Parallel()
			var first []runAnswer
			firstCode := -1
			for _, cmd := range []string{"analyze", "check", "leaks"} {
				out, errOut, code := torchmemShared(t, cmd, "--format", "json", dir)
				if code == exitBadInput {
					if cmd == "analyze" && strings.Contains(errOut, "no GPU memory events") {
						return // nothing measured: every command refuses alike (TestUnmeasured)
					}
					t.Fatalf("%s: exit 2: %s", cmd, errOut)
				}
				as := answersOf(t, cmd+" "+dir, out)
				if firstCode < 0 {
					first, firstCode = as, code
					continue
				}
				if code != firstCode || !slices.Equal(as, first) {
					t.Errorf("%s says %+v (exit %d)\nanalyze says %+v (exit %d)", cmd, as, code, first, firstCode)
				}
			}
			logs, _ := filepath.Glob(filepath.Join(dir, "*steps.jsonl"))
			for _, log := range logs {
				stepsAgree(t, log)
			}
		})
	}
}

// stepsAgree: steps on a log and analyze on the same log give one
// verdict, one figure per step, one peak and one exit code.
func stepsAgree(t *testing.T, log string) {
	out, _, code := torchmemShared(t, "steps", "--format", "json", log)
	var doc struct {
		Inputs []struct {
			Series []struct {
				Verdict            string `json:"verdict"`
				BytesPerStep       int64  `json:"bytes_per_step"`
				PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
			} `json:"series"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Inputs) != 1 || len(doc.Inputs[0].Series) != 1 {
		return // several devices in one log: analyze judges them together
	}
	s := doc.Inputs[0].Series[0]
	aOut, _, aCode := torchmemShared(t, "analyze", "--format", "json", log)
	as := answersOf(t, "analyze "+log, aOut)
	if len(as) != 1 {
		t.Fatalf("analyze %s: %d verdicts", log, len(as))
	}
	a := as[0]
	word := map[string]string{"growing": "leak", "flat": "clean", "unknown": "unknown"}[s.Verdict]
	if word == "" {
		word = s.Verdict
	}
	if code != aCode || word != a.Leak || s.PeakAllocatedBytes != a.Peak || (a.Leak == "leak" && s.BytesPerStep != a.BytesPerStep) {
		t.Errorf("%s: steps says %s %d B/step, peak %d (exit %d); analyze %s %d B/step, peak %d (exit %d)",
			log, s.Verdict, s.BytesPerStep, s.PeakAllocatedBytes, code, a.Leak, a.BytesPerStep, a.Peak, aCode)
	}
}

// A folder holding one run gives the JSON of that run's files given
// alone, field for field.
func TestFolderEqualsItsFiles(t *testing.T) {
	for _, dir := range runFolders(t) {
		t.Run(testdataName(dir), func(t *testing.T) {
			t.Parallel()
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var files []string
			for _, e := range entries {
				if e.IsDir() {
					return // runs in subfolders: not one run
				}
				files = append(files, filepath.Join(dir, e.Name()))
			}
			whole, errOut, code := torchmemShared(t, "analyze", "--format", "json", dir)
			if code == exitBadInput {
				return
			}
			// The files the folder's load read: not those it skipped.
			for _, l := range strings.Split(errOut, "\n") {
				if _, list, ok := strings.Cut(l, "torchmem does not read: "); ok {
					files = slices.DeleteFunc(files, func(f string) bool { return slices.Contains(strings.Split(list, ", "), f) })
				}
				if rest, ok := strings.CutPrefix(l, "torchmem: warning: skipping "+dir+"/"); ok {
					name, _, _ := strings.Cut(rest, ": ")
					files = slices.DeleteFunc(files, func(f string) bool { return f == filepath.Join(dir, name) })
				}
			}
			var doc struct {
				Verdicts []json.RawMessage `json:"verdicts"`
			}
			if json.Unmarshal([]byte(whole), &doc) != nil || len(doc.Verdicts) != 1 {
				return // not one run
			}
			alone, _, code2 := torchmemShared(t, append([]string{"analyze", "--format", "json"}, files...)...)
			if code2 != code || alone != whole {
				t.Errorf("the folder (exit %d) and its files given alone (exit %d) differ:\n%s", code, code2, firstDiff(whole, alone))
			}
		})
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  folder: %s\n  files:  %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(al), len(bl))
}

// textInputs are what each command is shown on in the width test: the
// goldens' recordings, a multi-rank run and a log of each kind.
var textInputs = map[string][][]string{
	"multirank": {{"analyze", "testdata/gpu/multirank/ddp4_leak"}, {"leaks", "testdata/gpu/multirank/ddp4_leak"}, {"check", "testdata/gpu/multirank/fsdp2_leak"}},
	"logs": {{"steps", "testdata/gpu/hf_trainer_leak/vm_816_20261201-080229_rank0.steps.jsonl"}, {"smi", "testdata/smi/per_process/shared"},
		{"analyze", "testdata/gpu/hf_trainer_leak"}, {"frag", "testdata/gpu/alloc_retry"}, {"snapshot", "testdata/gpu/hf_trainer_leak"}},
}

// word is a run of letters and digits: a word broken mid-word leaves
// pieces that the unbroken output does not hold.
var word = regexp.MustCompile(`[\pL\pN]+`)

// Every text line fits COLUMNS (80, 100, 200), nothing is cut ("..."),
// and no word is broken: every word of a narrow output is a word of the
// widest one.
func TestTextFitsColumns(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	var runs [][]string
	for name, formats := range commandFormats {
		if in, ok := goldenInputs[name]; ok && slices.Contains(formats, formatText) {
			runs = append(runs, append([]string{name}, in...))
		}
	}
	for _, rs := range textInputs {
		runs = append(runs, rs...)
	}
	wide := map[string]map[string]bool{} // the words at the widest
	for _, args := range runs {
		t.Setenv("COLUMNS", "400")
		out, _, _ := torchmem(t, args...)
		words := map[string]bool{}
		for _, w := range word.FindAllString(out, -1) {
			words[w] = true
		}
		wide[strings.Join(args, " ")] = words
	}
	for _, width := range []int{80, 100, 200} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			t.Setenv("COLUMNS", fmt.Sprint(width))
			for _, args := range runs {
				t.Run(strings.Join(args, " "), func(t *testing.T) {
					t.Parallel()
					out, _, _ := torchmem(t, args...)
					for i, l := range strings.Split(out, "\n") {
						if n := utf8.RuneCountInString(l); n > width {
							t.Errorf("line %d is %d columns: %q", i+1, n, l)
						}
						if strings.HasSuffix(strings.TrimRight(l, " │"), "...") {
							t.Errorf("line %d is cut: %q", i+1, l)
						}
					}
					words := wide[strings.Join(args, " ")]
					for _, w := range word.FindAllString(out, -1) {
						if !words[w] {
							t.Errorf("%q is not a word of the output at 400 columns: a word broken", w)
						}
					}
				})
			}
		})
	}
}
