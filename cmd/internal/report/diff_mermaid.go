package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/torchmem/torchmem/rules"
)

// maxChartSteps is the most points a Mermaid step chart draws; longer runs
// are drawn in as many buckets, each at its largest step.
const maxChartSteps = 60

// writeStepChartMermaid draws base's and head's peak allocated per step
// as a Mermaid xychart (GitHub renders Mermaid in Markdown, pull-request
// comments and job summaries). xychart-beta has no legend: the title
// names the colours, which the init directive fixes.
func writeStepChartMermaid(w io.Writer, d *rules.Diff) {
	if d.StepPeakAllocated == nil {
		return
	}
	base, head := d.StepPeakAllocated[0], d.StepPeakAllocated[1]
	n := min(len(base), len(head))
	if n == 0 {
		return
	}
	per := (n + maxChartSteps - 1) / maxChartSteps // steps per point
	var labels, bv, hv []string
	var top int64
	for lo := 0; lo < n; lo += per {
		hi := min(n, lo+per)
		label := fmt.Sprint(lo + 1)
		if hi-lo > 1 {
			label = fmt.Sprintf("%d-%d", lo+1, hi)
		}
		b, h := maxOf(base[lo:hi]), maxOf(head[lo:hi])
		top = max(top, b, h)
		labels = append(labels, `"`+label+`"`)
		bv = append(bv, mib(b))
		hv = append(hv, mib(h))
	}
	yMax := niceCeil(float64(top) / (1 << 20) * 1.05)
	fmt.Fprintln(w, "\n```mermaid")
	fmt.Fprintln(w, `%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "#1f77b4, #d62728"}}}}%%`)
	fmt.Fprintln(w, "xychart-beta")
	fmt.Fprintf(w, "  title %s\n", mermaidString("Peak allocated per step (MB = 2^20 bytes, as torch prints): base blue, head red"))
	fmt.Fprintf(w, "  x-axis %s [%s]\n", mermaidString("step, by position in the profiled window"), strings.Join(labels, ", "))
	fmt.Fprintf(w, "  y-axis %s 0 --> %s\n", mermaidString("MB"), trimFloat(yMax))
	fmt.Fprintf(w, "  line [%s]\n", strings.Join(bv, ", "))
	fmt.Fprintf(w, "  line [%s]\n", strings.Join(hv, ", "))
	fmt.Fprintln(w, "```")
	if len(base) != len(head) {
		fmt.Fprintf(w, "\nBase has %d steps, head %d: the chart shows the first %d of each.\n", len(base), len(head), n)
	}
}

// mermaidString quotes s for a Mermaid chart: a double quote would end
// the string, a newline the statement, and backticks or "%%" would start
// markup or a directive; they are dropped or replaced.
func mermaidString(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '"' || r == '`':
			return '\''
		case r < ' ' || r == 0x7f || r == 0x2028 || r == 0x2029:
			return ' '
		}
		return r
	}, s)
	s = strings.ReplaceAll(s, "%%", "% %")
	return `"` + s + `"`
}

func maxOf(v []int64) int64 {
	m := v[0]
	for _, x := range v[1:] {
		m = max(m, x)
	}
	return m
}

func mib(b int64) string { return trimFloat(math.Round(float64(b)/(1<<20)*10) / 10) }

func trimFloat(f float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") }

// niceCeil rounds up to a round number: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6
// or 8 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
