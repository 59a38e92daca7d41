package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/rules"
)

// countBySeverity returns how many findings have each severity.
func countBySeverity(fs []rules.Finding) (errs, warns, infos int) {
	for _, f := range fs {
		switch f.Severity {
		case rules.Error:
			errs++
		case rules.Warning:
			warns++
		default:
			infos++
		}
	}
	return
}

// verdictLine is the one line a PR comment or CI log starts with.
func verdictLine(fs []rules.Finding, inputs int) string {
	errs, warns, infos := countBySeverity(fs)
	status := "PASS"
	if errs > 0 {
		status = "FAIL"
	}
	return fmt.Sprintf("torchmem: %s: %d errors, %d warnings, %d notes in %d inputs", status, errs, warns, infos, inputs)
}

func writeFindingsText(w io.Writer, fs []rules.Finding) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "No findings.")
		return
	}
	for _, f := range fs {
		fmt.Fprintf(w, "[%s] %s: %s\n", strings.ToUpper(f.Severity.String()), f.Rule, f.Title)
		if f.Location != nil {
			fmt.Fprintf(w, "    at %s", f.Location)
			if f.Location.Function != "" {
				fmt.Fprintf(w, " (%s)", f.Location.Function)
			}
			fmt.Fprintln(w)
		}
		if f.Detail != "" {
			fmt.Fprintf(w, "    %s\n", f.Detail)
		}
		if f.Advice != "" {
			fmt.Fprintf(w, "    what to do: %s\n", f.Advice)
		}
		if f.Source != "" {
			fmt.Fprintf(w, "    in %s\n", f.Source)
		}
	}
}

// writeFindingsMarkdown fits $GITHUB_STEP_SUMMARY and PR comments: a
// verdict line, then a table.
func writeFindingsMarkdown(w io.Writer, fs []rules.Finding, inputs int) {
	errs, _, _ := countBySeverity(fs)
	icon := "✅"
	if errs > 0 {
		icon = "❌"
	}
	fmt.Fprintf(w, "%s **%s**\n\n", icon, verdictLine(fs, inputs))
	if len(fs) == 0 {
		return
	}
	tw := newTableWriter()
	tw.AppendHeader(table.Row{"Severity", "Rule", "Finding", "Where", "What to do"})
	for _, f := range fs {
		where := f.Operator
		if f.Location != nil {
			where = "`" + f.Location.String() + "`"
			if f.Operator != "" {
				where += " via `" + f.Operator + "`"
			}
		} else if where != "" {
			where = "`" + where + "`"
		}
		tw.AppendRow(table.Row{f.Severity.String(), "`" + f.Rule + "`", mdEscape(f.Title), where, mdEscape(f.Advice)})
	}
	fmt.Fprintln(w, tw.RenderMarkdown())
}

// mdEscape keeps table cells on one line and stops names with | or <
// from breaking the table or injecting HTML.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

// SARIF 2.1.0, enough for GitHub code scanning: findings with a Python
// file:line annotate that line in the pull request.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
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
	ArtifactLocation struct {
		URI string `json:"uri"`
	} `json:"artifactLocation"`
	Region *struct {
		StartLine int `json:"startLine"`
	} `json:"region,omitempty"`
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

func writeSARIF(w io.Writer, fs []rules.Finding, rs []rules.Rule) error {
	drv := sarifDriver{Name: "torchmem", Version: version, InformationURI: "https://github.com/torchmem/torchmem"}
	for _, r := range rs {
		drv.Rules = append(drv.Rules, sarifRule{ID: r.ID, ShortDescription: sarifText{r.Description}, DefaultConfiguration: map[string]string{"level": sarifLevel(r.Severity)}})
	}
	run := sarifRun{Tool: sarifTool{Driver: drv}, Results: []sarifResult{}}
	for _, f := range fs {
		res := sarifResult{RuleID: f.Rule, Level: sarifLevel(f.Severity), Message: sarifText{f.Title + ". " + f.Detail + " " + f.Advice}}
		var loc sarifLocation
		if f.Location != nil {
			loc.PhysicalLocation.ArtifactLocation.URI = f.Location.File
			loc.PhysicalLocation.Region = &struct {
				StartLine int `json:"startLine"`
			}{f.Location.Line}
		} else {
			loc.PhysicalLocation.ArtifactLocation.URI = f.Source
		}
		res.Locations = []sarifLocation{loc}
		run.Results = append(run.Results, res)
	}
	return writeJSON(w, sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}})
}
