package rules

import (
	"slices"

	"github.com/torchmem/torchmem/memtimeline/smi"
)

// The nvidia-smi rules' ids.
const (
	ruleSMILeak       = "smi.leak"
	ruleSMIMemoryHigh = "smi.memory-high"
	ruleSMIStarvation = "smi.starvation"
)

// withSMI is the rule set with the nvidia-smi analysis' options in force
// (the smi command's flags): the options that are thresholds become the
// smi rules' thresholds (smi.memory-high's fraction,
// smi.starvation's utilization), so that the findings, the verdict and
// the checklist judge with them (smi.leak's threshold only sets the
// severity of a leak: growth is a leak by its regularity, at any size).
// The rest (how long growth must last, its
// fit) is how the log is measured: Evaluate gives it to the inputs (Options.SMI),
// and with both the rules and the verdict share one analysis.
func (s RuleSet) withSMI(o smi.Options) RuleSet {
	s.Rules = slices.Clone(s.Rules)
	for i := range s.Rules {
		switch s.Rules[i].ID {
		case ruleSMIMemoryHigh:
			s.Rules[i].Threshold = o.Threshold
		case ruleSMIStarvation:
			s.Rules[i].Threshold = o.StarveUtilPct
		}
	}
	return s
}

// smiOptionsOf is how the rules in force analyze an input's nvidia-smi
// logs: the input's options (the smi command's flags, else smi's
// defaults) with the smi rules' thresholds, the inverse of withSMI.
// Evaluate gives every log these options, so that the verdict's evidence,
// the smi tables and the findings read one analysis. smi.leak's threshold
// sets severity, not the verdict (a leak is regular growth, at any size):
// growth under it is a warning (the rule's belowThreshold) and leaves the
// verdict LEAK, as memory.leak's does.
func (s RuleSet) smiOptionsOf(in *Input) smi.Options {
	o := in.smiOptions()
	o.Threshold = s.threshold(ruleSMIMemoryHigh)
	o.StarveUtilPct = s.threshold(ruleSMIStarvation)
	return o
}
