package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/rules"
)

func init() { subcommands = append(subcommands, newLeaksCmd) }

type leaksOptions struct {
	limits    chrometrace.Limits // the readers' caps (the --max-* flags)
	rulesFile string
	device    int
	minBytes  int64
	steady    int
	depth     int
	top       int
	format    string
}

func newLeaksCmd() *cobra.Command {
	o := &leaksOptions{}
	def := rules.DefaultLeakOptions()
	cmd := &cobra.Command{
		Use:   "leaks INPUT...",
		Short: "Does GPU memory leak step over step, how fast, and which line keeps it",
		Long: `Pairs every GPU allocation in the trace with its free and asks, step by step
(ProfilerStep#N), which blocks each step leaves alive at the end of the trace.

A site that keeps memory from each of at least 3 consecutive steps, the same
amount every step (or more every step: accelerating), is a leak at any size;
one that starts mid-window is found from where it starts. Memory made once
(parameters, optimizer state, accumulated gradients) or by the last step or two
(outputs, gradients), and rolling buffers that free what they kept, are not.
Each leak has a kind (container, autograd_graph, retain_graph, hook, unknown)
with its evidence and fix, its bytes per step, and its sites with the call
chain from the outermost frame down to the allocating one.

INPUT is a trace, several traces, or a directory of per-rank traces (rank read
from distributedInfo or from "rank<N>" in the file name); ranks are analysed in
parallel and a rank whose verdict differs from the others is named.

` + exitPolicy,
		Example: `  torchmem leaks trace.json.gz
  torchmem leaks traces/ --format json
  torchmem leaks trace.json.gz --min-bytes-per-step 65536`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limits = limitsOf(cmd)
			return runLeaks(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.rulesFile, "rules", "", "YAML file with rule thresholds, severities and disabled rules (as for check: the same verdict and exit code)")
	f.IntVar(&o.device, "device", -1, "only this GPU index (-1 = all)")
	sizeVar(f, &o.minBytes, "min-bytes-per-step", def.MinBytesPerStep, "kept for compatibility: the verdict does not depend on size (check's memory.leak threshold sets error vs warning)")
	f.IntVar(&o.steady, "steady-steps", def.SteadySteps, "final steps marked as steady state in the step table")
	f.IntVar(&o.depth, "depth", def.Depth, "innermost user frames kept per suspect chain (0 = the whole chain)")
	f.IntVar(&o.top, "top", 5, "suspects shown per input (0 = all)")
	f.StringVar(&o.format, "format", formatTable, "output format: table, json, markdown")
	return cmd
}

func runLeaks(stdout, stderr io.Writer, args []string, o *leaksOptions) error {
	def := rules.DefaultLeakOptions()
	if err := checkFormat(o.format, formatTable, formatJSON, formatMarkdown); err != nil {
		return err
	}
	rs, _, err := loadRules(o.rulesFile)
	if err != nil {
		return err
	}
	// The answer (verdicts, findings, exit code) and the per-file tables
	// read one leak analysis, made with this command's options: --device
	// filters the verdict as it filters the table.
	opts := rules.LeakOptions{Device: o.device, MinBytesPerStep: o.minBytes, SteadySteps: o.steady, Depth: o.depth, MinSteps: def.MinSteps}
	q := question{command: "leaks", fallback: load.Unknown, noCharts: true, options: rules.Options{Rules: rs},
		// With the default options, many inputs are read into summaries
		// to bound memory (their leak reports are made with those options).
		bounded: opts == def && o.rulesFile == ""}
	if opts != def {
		q.options.Leak = &opts
	}
	q.check = func(ins []*rules.Input) error {
		if !q.bounded && slices.ContainsFunc(ins, func(in *rules.Input) bool { return in.IsDigest() }) {
			warn(stderr, "summaries hold the leak analysis made with the default options (--device, --depth and --min-bytes-per-step apply to traces)")
		}
		if opts == def {
			return nil
		}
		return checkDevice(ins, o.device)
	}
	q.limits = o.limits
	ev, err := answer(stderr, args, q)
	if err != nil {
		return err
	}
	r := report.New(ev, report.Options{View: report.ViewLeaks, Format: o.format, Top: o.top})
	if err := report.Generate(stdout, r); err != nil {
		return err
	}
	if why := exitWithoutLeak(ev); why != "" {
		say(stderr, "%s", why)
	}
	return exitOf(ev, q.gate)
}

// exitWithoutLeak says why leaks exits 1 when no verdict is LEAK: the
// exit is every command's (an OOM is an error finding), so the reason is
// said, not hidden behind CLEAN lines.
func exitWithoutLeak(ev *rules.Evaluation) string {
	if ev.ExitCode() != rules.ExitFindings {
		return ""
	}
	for _, v := range ev.Verdicts {
		if v.Leak.Verdict == rules.LeakVerdictLeak {
			return ""
		}
	}
	var ids []string
	for _, f := range ev.Findings {
		if f.Severity == rules.Error && !slices.Contains(ids, f.Rule) {
			ids = append(ids, f.Rule)
		}
	}
	return "exit 1 without a leak: " + strings.Join(ids, ", ") + " (errors every command exits on; torchmem check lists them)"
}

// checkDevice refuses a --device no trace recorded memory on: the answer
// for it could only be "clean" by absence, which a gate must not pass.
func checkDevice(ins []*rules.Input, device int) error {
	if device < 0 {
		return nil
	}
	seen := map[int]bool{}
	traces := 0
	for _, in := range ins {
		if !in.Has(rules.SourceTrace) {
			continue
		}
		traces++
		for i := range in.Trace.Memory {
			if m := &in.Trace.Memory[i]; m.DeviceType != chrometrace.DeviceCPU {
				seen[int(m.DeviceID)] = true
			}
		}
	}
	if traces == 0 || seen[device] {
		return nil
	}
	var have []string
	for d := range seen {
		have = append(have, fmt.Sprint(d))
	}
	slices.Sort(have)
	recorded := "no GPU"
	if len(have) > 0 {
		recorded = "GPU " + strings.Join(have, ", ")
	}
	return fmt.Errorf("--device %d: the traces record no memory event on GPU %d (they record %s)", device, device, recorded)
}
