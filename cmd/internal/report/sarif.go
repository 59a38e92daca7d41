package report

import (
	"cmp"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/torchmem/torchmem/cmd/internal/escape"
	"github.com/torchmem/torchmem/rules"
)

// SARIF 2.1.0, enough for GitHub code scanning: findings with a Python
// file:line annotate that line in the pull request.
// sarifLog follows the SARIF schema (no schema_version of torchmem's).
func (sarifLog) OwnSchema() {}

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool sarifTool `json:"tool"`
	// OriginalURIBaseIDs says where SRCROOT, the base of every relative
	// artifact URI, lies on the machine that ran torchmem.
	OriginalURIBaseIDs map[string]sarifArtifact `json:"originalUriBaseIds,omitempty"`
	Results            []sarifResult            `json:"results"`
}

type sarifArtifact struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string            `json:"id"`
	ShortDescription     sarifText         `json:"shortDescription"`
	DefaultConfiguration map[string]string `json:"defaultConfiguration"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

func sarifLevel(s rules.Severity) string {
	switch s {
	case rules.Error:
		return "error"
	case rules.Warning:
		return "warning"
	}
	return "note"
}

// DefaultSourceRoot is the git work tree holding the current directory
// (the nearest parent with a .git entry), else the current directory.
func DefaultSourceRoot() string {
	cwd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := cwd; ; {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return cwd
		}
		dir = parent
	}
}

// sarifURI turns a path from a trace (a Python file as the profiler
// recorded it, or an input file) into a URI relative to root, percent-
// encoded. ok is false for a path outside root: code scanning could not
// match it to the repository, so it stays in the message only.
func sarifURI(root, path string) (uri string, ok bool) {
	if path == "" {
		return "", false
	}
	p := filepath.FromSlash(path)
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return "", false
		}
		p = rel
	}
	p = filepath.ToSlash(filepath.Clean(p))
	if p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
		return "", false
	}
	// escape.URIPath encodes ':' too, which would read as a scheme in a
	// relative reference's first segment.
	return escape.URIPath(p), true
}

// sarifRootURI is root as a file: URI ending in '/', as SARIF requires of
// an originalUriBaseIds entry.
func sarifRootURI(root string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(root)}
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path // a Windows drive letter
	}
	s := u.String()
	if !strings.HasSuffix(s, "/") {
		s += "/"
	}
	return s
}

// writeSARIF writes findings as SARIF 2.1.0 with artifact URIs relative to
// root (SRCROOT), so that code scanning annotates the line in the
// repository. A location outside root is named in the message instead.
func writeSARIF(w io.Writer, fs []rules.Finding, rs []rules.Rule, root, version string) error {
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	drv := sarifDriver{Name: "torchmem", Version: version, InformationURI: "https://github.com/torchmem/torchmem"}
	for _, r := range rs {
		drv.Rules = append(drv.Rules, sarifRule{ID: r.ID, ShortDescription: sarifText{r.Description}, DefaultConfiguration: map[string]string{"level": sarifLevel(r.Severity)}})
	}
	run := sarifRun{Tool: sarifTool{Driver: drv}, Results: []sarifResult{},
		OriginalURIBaseIDs: map[string]sarifArtifact{"SRCROOT": {URI: sarifRootURI(root)}}}
	for _, f := range fs {
		msg := f.Title + ". " + f.Detail + " " + f.Advice
		res := sarifResult{RuleID: f.Rule, Level: sarifLevel(f.Severity)}
		var phys sarifPhysical
		var where string
		if f.Location != nil {
			where = f.Location.String()
			if uri, ok := sarifURI(root, f.Location.File); ok {
				phys = sarifPhysical{ArtifactLocation: sarifArtifact{URI: uri, URIBaseID: "SRCROOT"}, Region: &sarifRegion{StartLine: max(cmp.Or(f.Location.Line, f.Location.DefLine), 1)}}
			}
		} else if f.Source != "" {
			where = f.Source
			if uri, ok := sarifURI(root, absPath(f.Source)); ok {
				phys = sarifPhysical{ArtifactLocation: sarifArtifact{URI: uri, URIBaseID: "SRCROOT"}}
			}
		}
		if phys.ArtifactLocation.URI != "" {
			res.Locations = []sarifLocation{{PhysicalLocation: phys}}
		} else if where != "" {
			msg += " (at " + where + ", outside the source root " + root + ")"
		}
		res.Message = sarifText{escape.SARIFText(msg)}
		run.Results = append(run.Results, res)
	}
	return WriteJSON(w, sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}})
}

// absPath makes an input path given on the command line absolute (it is
// relative to the current directory, unlike a recorded Python file).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
