package rules

import (
	"slices"

	"github.com/torchmem/torchmem/memtimeline/smi"
)

// The nvidia-smi rules' ids.
const (
	RuleSMILeak       = "smi.leak"
	RuleSMIMemoryHigh = "smi.memory-high"
	RuleSMIStarvation = "smi.starvation"
)

// WithSMI is the rule set with the nvidia-smi analysis' options in force
// (the smi command's flags): the options that are thresholds become the
// smi rules' thresholds (smi.leak's growth, smi.memory-high's fraction,
// smi.starvation's utilization), so that the findings, the verdict and
// the checklist judge with them. The rest (how long growth must last, its
// fit) is how the log is measured: the inputs carry it (Input.SMIOptions),
// and with both the rules and the verdict share one analysis.
func (s RuleSet) WithSMI(o smi.Options) RuleSet {
	s.Rules = slices.Clone(s.Rules)
	for i := range s.Rules {
		switch s.Rules[i].ID {
		case RuleSMILeak:
			s.Rules[i].Threshold = float64(o.MinGrowthBytes)
		case RuleSMIMemoryHigh:
			s.Rules[i].Threshold = o.Threshold
		case RuleSMIStarvation:
			s.Rules[i].Threshold = o.StarveUtilPct
		}
	}
	return s
}
