package main

import (
	"github.com/spf13/cobra"
)

// exitPolicy is the one exit policy of the commands that answer (analyze,
// check, leaks, report): they render one evaluation, so they exit alike.
const exitPolicy = `Exit status: 0 when no finding is at error severity, 1 when one is (a leak
verdict always comes with its finding: an error at or over memory.leak's
threshold, a warning under it), 2 for bad input or usage, and when no input
records memory at all (a trace without profile_memory=True): a gate never
passes what it could not measure; 3 when torchmem itself crashed (a bug,
never the input's fault).`

// subcommands lists the constructors of every subcommand; each command's file
// adds itself in init so that commands stay independent of one another.
var subcommands []func() *cobra.Command

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "torchmem",
		Short: "Where did my GPU memory go? Reads PyTorch profiler traces, memory timelines and allocator snapshots",
		Long: `torchmem reads what PyTorch's profiler writes (Kineto Chrome traces,
export_memory_timeline files, allocator snapshots, nvidia-smi logs) and tells
where GPU memory went: which operators and Python lines allocate it, whether it
leaks step over step, whether the caching allocator is fragmented, and whether
the run ran out of memory.

Inputs: every command takes files, directories and - (standard input).
Each file's kind is recognized by its content (gzipped or not), whatever its
name. A directory stands for the files under it: each command picks the kinds
it reads (ops and stacks the traces, snapshot the snapshots, ...), and a file
of no kind torchmem reads (a config.json) is skipped with a warning naming it,
as is anything in a directory that is not a regular file (a FIFO, socket or
device, which could block or never end).

Exit codes: 0 ok, 1 findings at error severity, 2 bad input or usage, 3 a bug
in torchmem (it crashed: the message names the file it was reading and shows
the stack; please report it); analyze, check, leaks and report render one
evaluation and exit alike (see their help).`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	addLimitFlags(root)
	for _, c := range subcommands {
		root.AddCommand(c())
	}
	vocabulary(root)
	return root
}
