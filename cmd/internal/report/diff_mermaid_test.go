package report

import (
	"regexp"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/rules/diff"
)

func TestMermaidString(t *testing.T) {
	got := mermaidString("a\"b`c\nd%%{init}%%\u2028e")
	if got != `"a'b'c d% %{init}% % e"` {
		t.Errorf("got %s", got)
	}
}

// A long run is drawn in at most maxChartSteps points, each bucket at its
// largest step, with as many labels as values; runs of different lengths
// are drawn over their common steps, and said so.
func TestStepChartMermaid(t *testing.T) {
	base, head := make([]int64, 1000), make([]int64, 990)
	for i := range base {
		base[i] = int64(i) << 20
	}
	for i := range head {
		head[i] = 2 * int64(i) << 20
	}
	var b strings.Builder
	writeStepChartMermaid(&b, &diff.Diff{StepPeakAllocated: &[2][]int64{base, head}})
	out := b.String()
	labels := regexp.MustCompile(`x-axis "[^"]*" \[(.*)\]`).FindStringSubmatch(out)
	lines := regexp.MustCompile(`(?m)^  line \[(.*)\]$`).FindAllStringSubmatch(out, -1)
	if labels == nil || len(lines) != 2 {
		t.Fatalf("no axis or not two lines:\n%s", out)
	}
	n := len(strings.Split(labels[1], ", "))
	if n > maxChartSteps || n != len(strings.Split(lines[0][1], ", ")) || n != len(strings.Split(lines[1][1], ", ")) {
		t.Errorf("%d labels, lines %d and %d values", n, len(strings.Split(lines[0][1], ", ")), len(strings.Split(lines[1][1], ", ")))
	}
	if !strings.HasSuffix(lines[1][1], ", 1978") || !strings.Contains(out, "y-axis \"MB\" 0 --> 2500") {
		t.Errorf("last head bucket should peak at 1978 MiB, axis at 2500:\n%s", out)
	}
	if !strings.Contains(out, "Base has 1000 steps, head 990: the chart shows the first 990 of each.") {
		t.Errorf("different lengths not said:\n%s", out)
	}
}
