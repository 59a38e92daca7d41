package main

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/examples"
)

func init() { subcommands = append(subcommands, newSnippetCmd) }

func newSnippetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "snippet",
		Short: "Print the drop-in Python file that records everything torchmem reads",
		Long: `Prints torchmem_profile.py: one self-contained file, torch only, to copy next to
your training script. Wrap the loop in it and call step() each iteration:

    from torchmem_profile import TorchMemProfile
    with TorchMemProfile() as tm:
        for batch in loader:
            train_step(batch)
            tm.step()

It profiles with a schedule (profile_memory, with_stack, record_shapes), exports
each cycle as <host>_rank<r>_step<n>.pt.trace.json.gz, records the allocator
history through the profiled window and dumps a snapshot (also on
OutOfMemoryError), and writes one line of memory_stats() per step. While the
job runs it watches that line: a regular leak or reserved memory near the
process's limit is said once in the training log, with a snapshot taken then
(on_alarm= and TORCHMEM_NOTIFY pass it on). TORCHMEM=0 turns it off; the file's
docstring lists every switch. Then: torchmem analyze torchmem_out/`,
		Example: `  torchmem snippet > torchmem_profile.py`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), examples.TorchmemProfile)
			return err
		},
	}
}
