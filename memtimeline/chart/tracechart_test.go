package chart

import (
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// One chart per GPU, with the trace's ProfilerStep bands.
func TestTraceSpecs(t *testing.T) {
	tr := memtest.NamedTrace(t, "resnet_train_clean")
	specs := TraceSpecs(tr, "c")
	if len(specs) != 1 || len(specs[0].Steps) != 4 {
		t.Errorf("specs %d, steps %d", len(specs), len(specs[0].Steps))
	}
	if _, err := Snippet(specs[0]); err != nil {
		t.Error(err)
	}
}

// A trace that records no Total Reserved (torch 1.8) gets no reserved
// line in its chart: 0 B would read as a measurement.
func TestTraceSpecsWithoutReserved(t *testing.T) {
	old := memtest.Trace(t, memtest.Testdata("public", "kineto_tb_plugin", "worker0.1623143089861.pt.trace.json.gz"))
	specs := TraceSpecs(old, "c")
	if len(specs) != 1 || specs[0].Reserved.Len() != 0 || specs[0].Allocated.Len() == 0 {
		t.Fatalf("%d specs; reserved %d points", len(specs), specs[0].Reserved.Len())
	}
	html, err := Snippet(specs[0])
	if err != nil {
		t.Fatal(err)
	}
	if s := string(html); strings.Contains(s, `"name":"reserved"`) || !strings.Contains(s, `"name":"allocated since the window's start"`) {
		t.Errorf("the chart draws a reserved line or does not say allocated counts from the window's start")
	}
}
