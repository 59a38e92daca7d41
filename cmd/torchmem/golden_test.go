package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenInputs are the real recordings each command is shown on, relative
// to the repository root (the test runs there, so paths print the same
// everywhere).
var goldenInputs = map[string][]string{
	"analyze":  {"testdata/gpu/leak_retain_graph/trace.json.gz"},
	"check":    {"testdata/gpu/leak_retain_graph/trace.json.gz"},
	"ops":      {"testdata/gpu/leak_retain_graph/trace.json.gz"},
	"stacks":   {"testdata/gpu/leak_retain_graph/trace.json.gz"},
	"leaks":    {"testdata/gpu/leak_retain_graph/trace.json.gz"},
	"frag":     {"testdata/gpu/leak_retain_graph/trace.json.gz"},
	"snapshot": {"testdata/gpu/leak_retain_graph/snapshot.pickle"},
	"steps":    {"testdata/gpu/leak_retain_graph/stats_steps.jsonl"},
	"smi":      {"testdata/smi/nvidia_smi_leak.csv"},
	"diff":     {"testdata/gpu/diff_pair/base/trace.json.gz", "testdata/gpu/diff_pair/head_leak/trace.json.gz"},
	"rules":    nil,
}

// TestGoldens prints every command in every format it has on a real
// recording and compares the output with testdata/cmd/golden/, so that
// any change of output is a readable diff in review. Whoever changes an
// output refreshes them with
//
//	go test ./cmd/torchmem -update
//
// and reviews the diff. Every JSON document carries schema_version; no
// format is refused; exit codes are those of the command's findings.
func TestGoldens(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for name, formats := range commandFormats {
		inputs, ok := goldenInputs[name]
		if !ok {
			t.Errorf("%s has no golden input", name)
			continue
		}
		for _, format := range formats {
			t.Run(name+"/"+format, func(t *testing.T) {
				args := append([]string{name, "--format", format}, inputs...)
				out, errOut, code := torchmem(t, args...)
				if code == exitBadInput {
					t.Fatalf("exit 2: %s", errOut)
				}
				if format == formatJSON {
					var doc struct {
						SchemaVersion *int `json:"schema_version"`
					}
					if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.SchemaVersion == nil || *doc.SchemaVersion != jsonSchemaVersion {
						t.Errorf("JSON without schema_version %d (%v): %.200s", jsonSchemaVersion, err, out)
					}
				}
				if root, err := os.Getwd(); err == nil {
					// SARIF's SRCROOT is this checkout's absolute path: the
					// same golden must hold in every worktree.
					out = strings.ReplaceAll(out, "file://"+filepath.ToSlash(root)+"/", "file:///SRCROOT/")
				}
				ext := map[string]string{formatText: "txt", formatJSON: "json", formatMarkdown: "md", formatCSV: "csv", formatSARIF: "sarif", formatFolded: "folded"}[format]
				checkGolden(t, "testdata/cmd/golden/"+name+"."+ext, out)
			})
		}
	}
}

// The shared vocabulary: "table" is text, --top 0 is all rows, a negative
// --top is a usage error on every command that has it.
func TestFlagVocabulary(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	trace := goldenInputs["ops"][0]
	text, _, _ := torchmem(t, "ops", "--format", "text", trace)
	table, _, _ := torchmem(t, "ops", "--format", "table", trace)
	if text != table || text == "" {
		t.Error("--format table differs from --format text")
	}
	some, _, _ := torchmem(t, "ops", "--top", "3", trace)
	all, _, _ := torchmem(t, "ops", "--top", "0", trace)
	if strings.Count(all, "\n") <= strings.Count(some, "\n") {
		t.Error("--top 0 does not show more rows than --top 3")
	}
	root := newRootCmd()
	for _, c := range root.Commands() {
		if c.Flags().Lookup("top") == nil {
			continue
		}
		args := append([]string{c.Name(), "--top", "-1"}, goldenInputs[c.Name()]...)
		if c.Name() == "report" {
			args = append(args, trace, "-o", filepath.Join(t.TempDir(), "r.html"))
		}
		_, errOut, code := torchmem(t, args...)
		if code != exitBadInput || !strings.Contains(errOut, "--top -1") || strings.Contains(errOut, "panic") {
			t.Errorf("%s --top -1: exit %d, %q", c.Name(), code, errOut)
		}
	}
	// Every command that prints a result has text, json and markdown.
	for _, c := range root.Commands() {
		if c.Flags().Lookup("format") == nil {
			continue
		}
		fs := formatsOf(c.Name())
		for _, f := range []string{formatText, formatJSON, formatMarkdown} {
			if !strings.Contains(strings.Join(fs, ","), f) {
				t.Errorf("%s lacks --format %s", c.Name(), f)
			}
		}
		got, _ := c.GetFlagCompletionFunc("format")
		if got == nil {
			t.Errorf("%s: --format values do not complete", c.Name())
		}
	}
}
