package rules

// The training.missing-zero-grad rule over the zerograd analysis
// (rules/zerograd): optimizer steps without a gradient reset between them.

import (
	"fmt"

	"github.com/torchmem/torchmem/rules/zerograd"
)

// ruleMissingZeroGrad is the rule's id.
const ruleMissingZeroGrad = "training.missing-zero-grad"

// adviceZeroGrad is what to do about it.
const adviceZeroGrad = "Reset gradients once per optimizer step: call optimizer.zero_grad(set_to_none=True) after optimizer.step() " +
	"(or before loss.backward()). Without it every step applies the sum of all gradients so far. To accumulate gradients on " +
	"purpose, call step() and zero_grad() together every k batches."

var keyZeroGrad = NewKey[zerograd.Report]("zero-grad")

// ZeroGrad is the trace's optimizer-step pairs and their resets.
func (in *Input) ZeroGrad() zerograd.Report {
	if in.IsDigest() {
		if in.Digest.ZeroGrad != nil {
			return *in.Digest.ZeroGrad
		}
		return zerograd.Report{}
	}
	return Get(in, keyZeroGrad, func() zerograd.Report { return zerograd.Analyze(in.Trace) })
}

func checkMissingZeroGrad(r *Rule, in *Input) []Finding {
	rep := in.ZeroGrad()
	if len(rep.Intervals) == 0 || rep.Offending == 0 || float64(rep.Offending) < r.Threshold*float64(len(rep.Intervals)) {
		return nil
	}
	adds := 0
	for _, iv := range rep.Intervals {
		if !iv.Reset {
			adds += iv.InPlaceAdds
		}
	}
	t := in.Trace
	op := t.HostOps[rep.StepOp]
	f := Finding{
		Title: fmt.Sprintf("Gradients are never reset: %d of %d optimizer steps follow one without zero_grad", rep.Offending, len(rep.Intervals)),
		Detail: fmt.Sprintf("%d optimizer steps (%s) and %d zero_grad calls in the window; between %d of the %d pairs of consecutive steps, "+
			"backward added into the existing gradients in place (%d AccumulateGrad calls doing aten::add_) and nothing reset them, "+
			"so each step applies the gradients of every earlier step as well. Memory does not grow: this is a training bug, not a leak.",
			rep.OptimizerSteps, t.Str(op.Name), rep.ZeroGrads, rep.Offending, len(rep.Intervals), adds),
		Advice:   adviceZeroGrad,
		Operator: t.Str(op.Name),
		Location: pyFrameIndex(in).UserLocation(op.Thread, op.Start),
		Metrics: map[string]float64{"optimizer_steps": float64(rep.OptimizerSteps), "zero_grads": float64(rep.ZeroGrads),
			"intervals": float64(len(rep.Intervals)), "intervals_without_reset": float64(rep.Offending), "in_place_accumulations": float64(adds)},
	}
	return []Finding{f}
}

func init() {
	register(&Rule{
		ID: ruleMissingZeroGrad,
		Description: "optimizer steps without a gradient reset in between (no zero_grad, backward adding into the old .grad): " +
			"every step applies all earlier gradients too",
		Severity:  Warning,
		Threshold: 0.5,
		Unit:      "fraction of optimizer step pairs",
		Reads:     []SourceKind{SourceTrace},
		Check:     checkMissingZeroGrad,
	})
}
