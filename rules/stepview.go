package rules

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// StepAnalysis is the input's step log fitted per device (its
// StepOptions, else the defaults): the one fit behind the step-growth
// rule, the leak evidence and the steps command's table. Zero without a
// step log.
func (in *Input) StepAnalysis() steplog.Analysis {
	if in.StepLog == nil {
		return steplog.Analysis{}
	}
	o := steplog.DefaultOptions()
	if in.stepOpts != nil {
		o = *in.stepOpts
	}
	return Get(in, NewKey[steplog.Analysis](fmt.Sprintf("steps:%+v", o)), func() steplog.Analysis { return steplog.Analyze(in.StepLog, o) })
}
