package main

import (
	"github.com/spf13/cobra"
)

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
of no kind torchmem reads (a config.json) is skipped with a warning naming it.

Exit codes: 0 ok, 1 findings at error severity, 2 bad input or usage.`,
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
