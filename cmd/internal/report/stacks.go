package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/torchmem/torchmem/cmd/internal/escape"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// SiteTable is one trace's allocation sites in the stacks view, already
// sorted and cut to --top (folded stacks: every site).
type SiteTable struct {
	Path  string
	Sites []memtimeline.Site
}

// writeStacks writes each trace's sites (folded: rooted at the trace's
// name when there are several).
func (r *Report) writeStacks(w io.Writer) error {
	return EachInput(w, r.Format, r.Stacks, func(w io.Writer, t SiteTable) error {
		label := ""
		if len(r.Stacks) > 1 {
			label = t.Path
		}
		if r.Format == Folded {
			weight, err := rules.SiteValue(r.Weight)
			if err != nil {
				return err
			}
			return writeFolded(w, t.Sites, weight, label)
		}
		return writeSites(w, t.Path, label, t.Sites, r.Format)
	})
}

// writeSites prints one trace's allocation sites. label, when set, names
// the trace (several traces): a CSV column, a heading.
func writeSites(w io.Writer, path, label string, sites []memtimeline.Site, format string) error {
	if format == JSON {
		out := struct {
			Trace  string    `json:"trace"`
			Stacks []SiteRow `json:"stacks"`
		}{Trace: path, Stacks: []SiteRow{}}
		for _, s := range sites {
			frames := s.Frames
			if frames == nil {
				frames = []string{}
			}
			out.Stacks = append(out.Stacks, SiteRow{Frames: frames, Operator: s.Operator, ForwardOperator: s.ForwardOp,
				AllocBytes: s.AllocBytes, LiveBytesAtEnd: s.LiveBytesAtEnd, LiveBytesAtPeak: s.LiveBytesAtPeak,
				Allocs: s.Allocs, LiveBlocksAtEnd: s.LiveBlocksAtEnd})
		}
		return WriteJSON(w, out)
	}
	tw := NewTable()
	exact := format == CSV
	bytesCol := func(n int64) string {
		if exact {
			return strconv.FormatInt(n, 10)
		}
		return memtimeline.FormatBytes(n)
	}
	unit := ""
	if exact {
		unit = " (bytes)"
	}
	// The table stacks frames outermost first, one per line; CSV and
	// Markdown put them on one line innermost first, each "← called from"
	// the next: the header says the order each one shows.
	stackHeader := "Python stack (outermost first)"
	if format != Text {
		stackHeader = "Python stack (innermost first, ← called from)"
	}
	header := table.Row{stackHeader, "Operator", "Allocated" + unit, "# Allocs", "Live at end" + unit, "Live at peak" + unit}
	csvLabel := label != "" && format == CSV
	if csvLabel {
		header = append(table.Row{"Trace"}, header...)
	}
	tw.AppendHeader(header)
	sep := "\n"
	if format != Text {
		sep = " ← "
	}
	for _, s := range sites {
		frames := s.Frames
		if len(frames) == 0 {
			frames = []string{"(no Python frames)"}
		}
		op := s.Operator
		if s.ForwardOp != "" {
			op += " (backward of " + s.ForwardOp + ")"
		}
		if format == Text {
			op = strings.ReplaceAll(op, " > ", "\n> ")
		}
		stack := strings.Join(frames, sep)
		if format != Text {
			rev := slices.Clone(frames)
			slices.Reverse(rev)
			stack = strings.Join(rev, sep)
		}
		row := table.Row{stack, op, bytesCol(s.AllocBytes), s.Allocs, bytesCol(s.LiveBytesAtEnd), bytesCol(s.LiveBytesAtPeak)}
		if csvLabel {
			row = append(table.Row{label}, row...)
		}
		tw.AppendRow(row)
		if format == Text {
			tw.AppendSeparator()
		}
	}
	tw.SetColumnConfigs([]table.ColumnConfig{
		{Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight},
		{Number: 5, Align: text.AlignRight}, {Number: 6, Align: text.AlignRight},
	})
	if format == Markdown && label != "" {
		fmt.Fprintf(w, "### %s\n\n", mdEscape(path))
	}
	if format == Text && label != "" {
		fmt.Fprintf(w, "%s\n", path)
	}
	Table(w, tw, format)
	return nil
}

// writeFolded writes one line per site, in the Evaluation's order (by
// weight): frames and operators joined by ';', outermost first, then the
// weight in bytes.
func writeFolded(w io.Writer, sites []memtimeline.Site, weight func(*memtimeline.Site) int64, root string) error {
	clean := escape.FoldedFrame
	for _, s := range sites {
		v := weight(&s)
		if v <= 0 {
			continue
		}
		parts := make([]string, 0, len(s.Frames)+5)
		if root != "" {
			parts = append(parts, clean(root))
		}
		for _, f := range s.Frames {
			parts = append(parts, clean(f))
		}
		for _, op := range strings.Split(s.Operator, " > ") {
			if op != "" {
				parts = append(parts, clean(op))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, "(unknown)")
		}
		if _, err := fmt.Fprintf(w, "%s %d\n", strings.Join(parts, ";"), v); err != nil {
			return err
		}
	}
	return nil
}
