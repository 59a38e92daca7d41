package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// jsonFields are JSON.md's field lists of one command: object path ->
// field -> required.
type jsonFields map[string]map[string]bool

// documentedFields reads the ```fields COMMAND blocks of JSON.md.
func documentedFields(t *testing.T) map[string]jsonFields {
	t.Helper()
	f, err := os.Open("JSON.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]jsonFields{}
	var cur jsonFields
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```fields "):
			cur = jsonFields{}
			out[strings.TrimPrefix(line, "```fields ")] = cur
		case line == "```":
			cur = nil
		case cur != nil && strings.TrimSpace(line) != "":
			path, list, ok := strings.Cut(line, ": ")
			if !ok {
				t.Fatalf("JSON.md: bad field line %q", line)
			}
			fields := map[string]bool{}
			for _, k := range strings.Split(list, ", ") {
				name, optional := strings.CutSuffix(k, "?")
				fields[name] = !optional
			}
			cur[path] = fields
		}
	}
	return out
}

// checkDocumented walks a decoded document: every object's fields must be
// listed for its path, and every required one present.
func checkDocumented(t *testing.T, file string, doc jsonFields, v any, path string) {
	switch x := v.(type) {
	case map[string]any:
		fields, ok := doc[path]
		if !ok {
			t.Errorf("%s: object %s is not documented in JSON.md", file, path)
			return
		}
		if _, any := fields["*"]; any {
			return
		}
		var keys []string
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, ok := fields[k]; !ok {
				t.Errorf("%s: %s has field %q, not in JSON.md", file, path, k)
				continue
			}
			child := k
			if path != "." {
				child = path + "." + k
			}
			checkDocumented(t, file, doc, x[k], child)
		}
		for k, required := range fields {
			if _, ok := x[k]; required && !ok {
				t.Errorf("%s: %s lacks field %q that JSON.md says is always there (mark it %q if it may be absent)", file, path, k, k+"?")
			}
		}
	case []any:
		if path == "." {
			path = ""
		}
		for _, e := range x {
			checkDocumented(t, file, doc, e, path+"[]")
		}
	}
}

// Every command's JSON golden holds exactly the fields JSON.md lists.
func TestJSONDocumented(t *testing.T) {
	docs := documentedFields(t)
	root := filepath.Join("..", "..")
	goldens, _ := filepath.Glob(filepath.Join(root, "testdata", "cmd", "golden", "*.json"))
	extra := map[string][]string{
		"frag": {filepath.Join(root, "testdata", "cmd", "frag_frag_small_allocs.json")},
		"smi":  mustGlob(t, filepath.Join(root, "testdata", "smi", "*.smi.json.golden")),
		// nvidia-smi beside torch's numbers: the verdict's gpu entry.
		"analyze": append(mustGlob(t, filepath.Join(root, "testdata", "smi", "*.analyze.json.golden")),
			// The framework dump trees (TestDumpTreeGoldens).
			mustGlob(t, filepath.Join(root, "testdata", "cmd", "golden", "dumptree", "*.json"))...),
		"steps": mustGlob(t, filepath.Join(root, "testdata", "steps", "*.steps.json.golden")),
	}
	var seen []string
	for _, g := range goldens {
		cmd := strings.TrimSuffix(filepath.Base(g), ".json")
		seen = append(seen, cmd)
		doc, ok := docs[cmd]
		if !ok {
			t.Errorf("JSON.md has no fields block for %s", cmd)
			continue
		}
		for _, file := range append([]string{g}, extra[cmd]...) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			checkDocumented(t, file, doc, v, ".")
		}
	}
	for cmd := range docs {
		if !slices.Contains(seen, cmd) {
			t.Errorf("JSON.md documents %s, which has no JSON golden", cmd)
		}
	}
	// Every command with --format json has a golden, so every shape is checked.
	for cmd, formats := range commandFormats {
		if slices.Contains(formats, formatJSON) && !slices.Contains(seen, cmd) {
			t.Errorf("%s prints JSON but has no golden in testdata/cmd/golden", cmd)
		}
	}
}

func mustGlob(t *testing.T, pattern string) []string {
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("%s: no files", pattern)
	}
	return m
}
