package report

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// The verdict block: what a user reads first, before any table. It is
// rules.Verdict (computed once per run and rank) rendered for the
// terminal, Markdown and HTML; JSON carries the structure itself.

// shortOp shortens operator names for narrow tables: autograd's wrapper
// names keep the node ("autograd::engine::evaluate_function: AddmmBackward0"
// -> "autograd: AddmmBackward0"), optimizer steps their class.
func shortOp(name string) string {
	for _, p := range []struct{ long, short string }{
		{"autograd::engine::evaluate_function: ", "autograd: "},
		{"Optimizer.step#", "optimizer: "},
		{"Optimizer.zero_grad#", "zero_grad: "},
	} {
		if rest, ok := strings.CutPrefix(name, p.long); ok {
			return p.short + rest
		}
	}
	return name
}

// wrapEntry wraps "LABEL  text" to width with a hanging indent under
// the text; nothing is cut (a fix or a location past the width would be
// lost in a CI log).
func wrapEntry(label, body string, width int) []string {
	const indent = 9
	pad := strings.Repeat(" ", indent)
	avail := max(20, width-indent)
	wrapped := strings.Split(wrapAtJoints(body, avail), "\n")
	out := make([]string, len(wrapped))
	for i, l := range wrapped {
		l = strings.TrimRight(l, " ")
		if i == 0 {
			out[i] = fmt.Sprintf("  %-6s %s", label, l)
		} else {
			out[i] = pad + l
		}
	}
	return out
}

// holdingChain renders the frames that keep a leak, outermost first.
func holdingChain(l rules.LeakAnswer, limit int) string {
	var frames []string
	for _, f := range l.Holding {
		frames = append(frames, f)
	}
	if len(frames) > limit {
		frames = frames[len(frames)-limit:]
	}
	s := strings.Join(frames, " → ")
	if s == "" && l.Location != nil {
		s = l.Location.String()
	}
	return s
}

// displayPath shortens an absolute path of the user's code to its last
// two elements for the verdict's line (JSON and SARIF keep it whole).
func displayPath(p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	dir, file := filepath.Split(p)
	return "…/" + filepath.Join(filepath.Base(dir), file)
}

// leakLine is the LEAK/CLEAN/UNKNOWN entry's text, with the holding
// chain inline (text and Markdown) or without (HTML collapses it).
func leakLine(l rules.LeakAnswer) string { return leakText(l, true) }

func leakText(l rules.LeakAnswer, chain bool) string {
	switch l.Verdict {
	case rules.LeakVerdictLeak:
		s := l.Figure()
		if l.Kind != "" {
			s += ", " + l.Kind
		}
		if l.Location != nil {
			if l.Location.Line > 0 {
				s += fmt.Sprintf(" allocated at %s:%d", displayPath(l.Location.File), l.Location.Line)
			} else {
				s += " allocated in " + displayPath(l.Location.File)
			}
			switch {
			case l.Location.Line <= 0 && l.Location.DefLine > 0:
				s += fmt.Sprintf(" (%s, def line %d; the trace does not record the allocating line)", l.Location.Function, l.Location.DefLine)
			case l.Location.Line <= 0:
				s += fmt.Sprintf(" (%s; the trace does not record the line)", l.Location.Function)
			case l.Location.Function != "":
				s += " (" + l.Location.Function + ")"
			}
		}
		if slices.ContainsFunc(l.Holding, chrometrace.IsGeneratedFrame) {
			s += " inside a compiled region (torch.compile's generated code; the line is the user's call into it)"
		}
		if l.Operator != "" {
			s += " via " + shortOp(l.Operator)
		}
		if l.Leaks > 1 {
			s += fmt.Sprintf(" (and %d more leaks)", l.Leaks-1)
		}
		if l.Fix != "" {
			s += "; fix: " + l.Fix
		}
		if l.KindEvidence != "" {
			s += "; why: " + l.KindEvidence
		}
		if c := holdingChain(l, 4); chain && c != "" && len(l.Holding) > 1 {
			s += "; chain: " + c
		}
		return s
	case rules.LeakVerdictClean:
		return "no growth step over step; " + l.Reason
	}
	return l.Reason
}

func evidenceLine(l rules.LeakAnswer) string {
	s := "from " + l.From
	if l.Agreement != "" {
		s += "; " + l.Agreement
	}
	if l.Settle != "" {
		s += ". To settle it: " + l.Settle
	}
	return s
}

func oomLine(o rules.OOMAnswer) string {
	s := fmt.Sprintf("%s requested: %s OOM", memtimeline.FormatBytes(o.RequestBytes), o.Cause)
	var parts []string
	if o.AllocatedBytes >= 0 {
		parts = append(parts, "allocated "+memtimeline.FormatBytes(o.AllocatedBytes))
	}
	if o.ReservedBytes >= 0 {
		parts = append(parts, "reserved "+memtimeline.FormatBytes(o.ReservedBytes))
	}
	if o.FreeInCacheBytes >= 0 {
		parts = append(parts, "free in cache "+memtimeline.FormatBytes(o.FreeInCacheBytes))
	}
	if o.LargestFreeBlock >= 0 {
		parts = append(parts, "largest free block "+memtimeline.FormatBytes(o.LargestFreeBlock))
	}
	if o.DeviceFreeBytes >= 0 {
		parts = append(parts, "free on device "+memtimeline.FormatBytes(o.DeviceFreeBytes))
	}
	if o.CapacityBytes > 0 {
		parts = append(parts, "GPU "+memtimeline.FormatBytes(o.CapacityBytes))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	if o.Location != nil {
		s += " at " + o.Location.String()
	}
	s += "; " + o.Reason
	if o.StateNote != "" && o.Cause != rules.OOMCauseUnknown {
		s += " (" + o.StateNote + ")"
	}
	if o.FilledBy != "" {
		s += "; the chain: " + o.FilledBy
	}
	return s
}

// answerEntries are the verdict's lines after FRAG: the leak's time to
// OOM, reserved growing while allocated is flat, the allocator settings.
func answerEntries(v rules.Verdict) (labels, texts []string) {
	if fc := v.Leak.Forecast; fc != nil {
		labels, texts = append(labels, "TO OOM"), append(texts, fc.Text)
	}
	if f := v.Frag; f != nil {
		if g := f.ReservedGrowth; g != nil {
			t := g.Reason
			if g.AllocConf != "" {
				t += "; allocator settings: " + g.AllocConf
			}
			labels, texts = append(labels, "RESV"), append(texts, t+"; "+g.Advice)
		}
		if f.Settings != "" {
			labels, texts = append(labels, "ALLOC"), append(texts, f.Settings)
		}
	}
	return labels, texts
}

func fragLine(f *rules.FragAnswer) string {
	s := strings.ToUpper(f.Verdict)
	switch {
	case f.Cost != "" && f.Verdict == rules.FragVerdictFragmented:
		// What it cost leads; the measurement follows.
		return s + ": cost: " + f.Cost
	case f.Cost != "":
		return s + ": " + f.Cost
	}
	if f.Wasted != "" {
		s += fmt.Sprintf(": %s %s", memtimeline.FormatBytes(f.WastedBytes), f.Wasted)
	}
	if f.Verdict != rules.FragVerdictOK && f.Reason != "" {
		sep := ": "
		if f.Wasted != "" {
			sep = "; "
		}
		s += sep + f.Reason
	}
	return s
}

func peakLine(p *rules.PeakAnswer) string {
	s := memtimeline.FormatBytes(p.AllocatedBytes) + " allocated"
	if p.RelativeToWindowStart {
		s += " above the profiled window's start (the trace records no allocator totals)"
	}
	c := p.Composition
	if c != nil && c.AllocatedBytes < p.AllocatedBytes && !p.RelativeToWindowStart {
		// torch's peak from the step log, above the profiled window's: the
		// holders are the window's.
		s += " by " + p.Step + " (torch's allocated_bytes.all.peak, " + filepath.Base(p.Source) + ")"
		s += "; in the profiled window " + memtimeline.FormatBytes(c.AllocatedBytes)
		if c.Step != "" {
			s += " at " + c.Step
		}
	} else if p.Step != "" {
		s += " at " + p.Step
	}
	if c != nil && c.Phase != "" {
		s += " (" + c.Phase + ")"
	}
	var hs []string
	for _, h := range p.Holders {
		hs = append(hs, fmt.Sprintf("%s %s", h.Where, memtimeline.FormatBytes(h.Bytes)))
	}
	if len(hs) > 0 {
		s += ": " + strings.Join(hs, " · ")
	}
	return s
}

// categoryLine is the peak's split by category, largest first: torch's
// own when the run exported its memory timeline, else the estimate.
func categoryLine(c *memtimeline.Composition) string {
	if c == nil {
		return ""
	}
	if len(c.Torch) > 0 && !c.Estimated {
		return "by category (torch's export_memory_timeline): " + joinShares(c.Torch)
	}
	if len(c.Torch) > 0 {
		return fmt.Sprintf("by category (torch's export_memory_timeline; the estimate agrees %.0f%%): %s", 100*c.Agreement, joinShares(c.Torch))
	}
	if s := joinShares(c.ByCategory); s != "" {
		return "by category (estimated from lifetimes and phases): " + s
	}
	return ""
}

func joinShares(in []memtimeline.Share) string {
	shares := slices.Clone(in)
	slices.SortStableFunc(shares, func(a, b memtimeline.Share) int { return cmp.Compare(b.Bytes, a.Bytes) })
	var cs []string
	for _, k := range shares {
		if k.Bytes > 0 {
			name := k.Name
			if name == strings.ToLower(name) { // ours; torch's (AUTOGRAD_DETAIL) keep torch's spelling
				name = strings.ReplaceAll(name, "_", " ")
			}
			cs = append(cs, fmt.Sprintf("%s %s", name, memtimeline.FormatBytes(k.Bytes)))
		}
	}
	return strings.Join(cs, ", ")
}

// hostLine is the pinned-host-memory verdict in a line.
func hostLine(h *rules.HostAnswer) string {
	switch h.Verdict {
	case rules.LeakVerdictLeak:
		return "LEAK: " + h.Reason
	case rules.LeakVerdictClean:
		return "OK: " + h.Reason
	}
	return "unknown: " + h.Reason
}

// verdictHeader names the group and its files.
func verdictHeader(v rules.Verdict) string {
	if len(v.Sources) == 1 && v.Name == v.Sources[0] {
		return fmt.Sprintf("%s: %s", v.Status(), v.Name)
	}
	return fmt.Sprintf("%s: %s: %s", v.Status(), v.Name, strings.Join(sourceNames(v.Sources), ", "))
}

// sourceNames names a run's files by their path under the folder they
// share: the base name for one folder's files, iteration_10/rank0_... for
// a dump tree's, where the base names repeat.
func sourceNames(sources []string) []string {
	common := ""
	for i, s := range sources {
		d := filepath.Dir(s)
		if i == 0 {
			common = d
			continue
		}
		for common != "." && common != string(filepath.Separator) && d != common && !strings.HasPrefix(d, common+string(filepath.Separator)) {
			common = filepath.Dir(common)
		}
	}
	names := make([]string, 0, len(sources))
	for _, s := range sources {
		name := filepath.Base(s)
		if rel, err := filepath.Rel(common, s); err == nil && !strings.HasPrefix(rel, "..") {
			name = rel
		}
		names = append(names, name)
	}
	return names
}

// writeVerdictText prints each run's block, wrapped at width.
func writeVerdictText(w io.Writer, vs []rules.Verdict, width int) {
	for _, v := range vs {
		lines := []string{verdictHeader(v)} // the wrap writer folds it
		lines = append(lines, wrapEntry(strings.ToUpper(v.Leak.Verdict), leakLine(v.Leak), width)...)
		if v.Leak.Agreement != "" || v.Leak.Settle != "" || (v.Leak.From != "" && v.Leak.Verdict == rules.LeakVerdictLeak) {
			lines = append(lines, wrapEntry("", evidenceLine(v.Leak), width)...)
		}
		for i, o := range v.OOMs {
			if i == 1 {
				lines = append(lines, wrapEntry("", fmt.Sprintf("and %d more out-of-memory errors", len(v.OOMs)-1), width)...)
				break
			}
			lines = append(lines, wrapEntry("OOM", oomLine(o), width)...)
		}
		if v.Frag != nil {
			lines = append(lines, wrapEntry("FRAG", fragLine(v.Frag), width)...)
			if v.Frag.Retries != "" {
				lines = append(lines, wrapEntry("RETRY", v.Frag.Retries, width)...)
			}
		}
		xl, xt := answerEntries(v)
		for i := range xl {
			lines = append(lines, wrapEntry(xl[i], xt[i], width)...)
		}
		if v.Host != nil {
			lines = append(lines, wrapEntry("HOST", hostLine(v.Host), width)...)
		}
		if v.Peak != nil {
			lines = append(lines, wrapEntry("PEAK", peakLine(v.Peak), width)...)
			if c := categoryLine(v.Peak.Composition); c != "" {
				lines = append(lines, wrapEntry("", c, width)...)
			}
		}
		// The GPU entries answer another question (nvidia-smi's), asked
		// only when an smi log is given.
		labels, texts := gpuEntries(v.GPU)
		for i := range labels {
			lines = append(lines, wrapEntry(labels[i], texts[i], width)...)
		}
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintln(w)
	}
}

// writeVerdictMarkdown is the block for $GITHUB_STEP_SUMMARY and PR
// comments: one bullet list per run and rank.
func writeVerdictMarkdown(w io.Writer, vs []rules.Verdict) {
	for _, v := range vs {
		fmt.Fprintf(w, "**%s**\n\n", mdEscape(verdictHeader(v)))
		fmt.Fprintf(w, "- **%s** %s\n", strings.ToUpper(v.Leak.Verdict), mdEscape(leakLine(v.Leak)))
		if v.Leak.Verdict == rules.LeakVerdictLeak || v.Leak.Agreement != "" {
			fmt.Fprintf(w, "  - %s\n", mdEscape(evidenceLine(v.Leak)))
		}
		for _, o := range v.OOMs {
			fmt.Fprintf(w, "- **OOM** %s\n", mdEscape(oomLine(o)))
		}
		if v.Frag != nil {
			fmt.Fprintf(w, "- **FRAG** %s\n", mdEscape(fragLine(v.Frag)))
			if v.Frag.Retries != "" {
				fmt.Fprintf(w, "- **RETRY** %s\n", mdEscape(v.Frag.Retries))
			}
		}
		xl, xt := answerEntries(v)
		for i := range xl {
			fmt.Fprintf(w, "- **%s** %s\n", xl[i], mdEscape(xt[i]))
		}
		if v.Host != nil {
			fmt.Fprintf(w, "- **HOST** %s\n", mdEscape(hostLine(v.Host)))
		}
		if v.Peak != nil {
			fmt.Fprintf(w, "- **PEAK** %s\n", mdEscape(peakLine(v.Peak)))
			if c := categoryLine(v.Peak.Composition); c != "" {
				fmt.Fprintf(w, "  - %s\n", mdEscape(c))
			}
		}
		labels, texts := gpuEntries(v.GPU)
		for i := range labels {
			fmt.Fprintf(w, "- **%s** %s\n", labels[i], mdEscape(texts[i]))
		}
		fmt.Fprintln(w)
	}
}

// gpuEntries are the verdict's GPU lines: nvidia-smi split by torch's
// numbers (GPU), and who holds the memory (PROC).
func gpuEntries(g *rules.GPUAnswer) (labels, texts []string) {
	if g == nil {
		return nil, nil
	}
	if g.Split != "" {
		labels, texts = append(labels, "GPU"), append(texts, g.Split)
	}
	if g.Processes != "" {
		labels, texts = append(labels, "PROC"), append(texts, g.Processes)
	}
	return labels, texts
}
