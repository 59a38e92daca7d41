package rules

import (
	"strings"

	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
)

// The verdict is the answer a user reads first: does it leak (how much per
// step, what kind, which line holds it), did it run out of memory and why,
// does the cache waste memory, and what fills the peak. It is computed once
// per run and rank from the inputs' memoized analyses and rendered by every
// output format (text, Markdown, JSON, HTML) from this one structure.

// Verdict is the answer for one run and rank.
type Verdict struct {
	// Name labels the group ("rank 0", the file name for a lone input).
	Name string `json:"name"`
	Run  string `json:"run,omitempty"`
	// Job says when several process run ids were read as one job's ranks
	// (older snippets: one run id per process), and which.
	Job     string      `json:"job,omitempty"`
	Rank    int64       `json:"rank"`
	Sources []string    `json:"sources"`
	Leak    LeakAnswer  `json:"leak"`
	OOMs    []OOMAnswer `json:"ooms"`
	Frag    *FragAnswer `json:"fragmentation,omitempty"`
	Peak    *PeakAnswer `json:"peak,omitempty"`
	// GPU is nvidia-smi against torch's numbers, and per process.
	GPU *GPUAnswer `json:"gpu,omitempty"`
	// Host is pinned host memory, from a steps log that records it.
	Host   *HostAnswer `json:"pinned_host,omitempty"`
	Inputs []*Input    `json:"-"`
}

// rankOrContents is the loader's rank, else one a memory_summary log
// names in its logger prefix ("rank0:").
func (in *Input) rankOrContents() int64 {
	if in.Rank >= 0 || !in.Has(SourceMemSummary) {
		return in.Rank
	}
	r := int64(-1)
	for _, s := range in.MemSummary.Samples {
		switch {
		case s.Rank < 0:
		case r < 0:
			r = int64(s.Rank)
		case r != int64(s.Rank):
			return -1 // several ranks in one log
		}
	}
	return r
}

// Input.SnapshotLeaks, Attribution and Lifetimes are in input.go.

// judge is the verdict of one run and rank from all of its inputs, with
// the built-in rules' thresholds.
func judge(name string, ins []*Input) Verdict { return judgeWith(name, ins, DefaultJudgeOptions()) }

// judgeWith is judge with the thresholds in force.
func judgeWith(name string, ins []*Input, o JudgeOptions) Verdict {
	v := Verdict{Name: name, Rank: -1, Inputs: ins, Sources: []string{}}
	var ev []LeakEvidence
	for _, in := range ins {
		v.Sources = append(v.Sources, in.Source)
		ev = append(ev, groupLeakEvidence(in, ins)...)
		if r := in.rankOrContents(); r >= 0 && v.Rank < 0 {
			v.Rank = r
		}
	}
	ev = append(ev, snapshotSeriesEvidence(ins)...)
	smiLeakRates(ev, ins)
	v.Leak = judgeLeak(ev)
	v.GPU = judgeGPU(ins)
	v.OOMs = judgeOOMs(ins)
	if v.OOMs == nil {
		v.OOMs = []OOMAnswer{}
	}
	v.Frag = judgeFrag(ins, o)
	v.Frag = addRetries(v.Frag, ins)
	v.Frag = fragCost(v.Frag, v.OOMs, ins) // fragcost.go
	chainOOMs(&v)                          // oomchain.go
	if s := allocSettings(ins); s != "" {  // allocsettings.go
		if v.Frag == nil {
			v.Frag = &FragAnswer{Verdict: frag.VerdictUnknown, Costs: []string{}, LimitBytes: -1, HeadroomBytes: -1}
		}
		v.Frag.Settings = s
	}
	v.Leak.Forecast = forecast(&v)
	v.Peak = judgePeak(ins)
	v.Host = judgeHost(ins)
	return v
}

// Status is the verdict's word for a headline: LEAK, OOM, CLEAN, UNKNOWN.
func (v *Verdict) Status() string {
	switch {
	case v.Leak.Verdict == leak.VerdictLeak:
		return "LEAK"
	case len(v.OOMs) > 0:
		return "OOM"
	case v.Host != nil && v.Host.Verdict == leak.VerdictLeak:
		return "LEAK" // of pinned host memory: its own line says so
	}
	return strings.ToUpper(v.Leak.Verdict)
}
