package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/torchmem/torchmem/memtimeline"
)

// One vocabulary for every command's flags, applied to the command tree
// in one place (vocabulary), so that a command cannot drift from it:
//
//   - --format: text (table is its alias), json and markdown on every
//     command that prints a result, plus csv, sarif or folded where they
//     apply; the values complete in the shell;
//   - --top N: the first N rows, 0 = all, a negative N is a usage error;
//   - the values of --sort, --group-by, --weight complete; --rules
//     completes YAML files.

// commandFormats are the --format values of each command, text first.
var commandFormats = map[string][]string{
	"analyze":  {formatText, formatJSON, formatMarkdown},
	"check":    {formatText, formatJSON, formatMarkdown, formatSARIF},
	"diff":     {formatText, formatJSON, formatMarkdown},
	"frag":     {formatText, formatJSON, formatMarkdown},
	"leaks":    {formatText, formatJSON, formatMarkdown},
	"ops":      {formatText, formatJSON, formatMarkdown, formatCSV},
	"rules":    {formatText, formatJSON, formatMarkdown},
	"smi":      {formatText, formatJSON, formatMarkdown},
	"snapshot": {formatText, formatJSON, formatMarkdown},
	"stacks":   {formatText, formatJSON, formatMarkdown, formatCSV, formatFolded},
	"steps":    {formatText, formatJSON, formatMarkdown},
}

// flagValues are the fixed values of other flags, for completion.
var flagValues = map[string]map[string][]string{
	"ops":    {"sort": {"self", "total", "calls", "allocs"}, "group-by": {"name", "shape", "stack"}},
	"stacks": {"sort": {"alloc", "live", "peak", "allocs"}, "weight": {"alloc", "live", "peak"}},
}

// formatAlias reads --format, taking "table" (the older name) for text.
type formatAlias struct{ pflag.Value }

func (f formatAlias) Set(s string) error {
	if strings.EqualFold(s, "table") {
		s = formatText
	}
	return f.Value.Set(s)
}

// vocabulary applies the shared flag vocabulary to every subcommand.
func vocabulary(root *cobra.Command) {
	for _, c := range root.Commands() {
		name := c.Name()
		if fl := c.Flags().Lookup("format"); fl != nil {
			fl.Value = formatAlias{fl.Value}
			formats := commandFormats[name]
			if len(formats) > 0 {
				fl.Usage = "output format: " + strings.Join(formats, ", ") + " (table = text)"
				c.RegisterFlagCompletionFunc("format", fixedValues(formats))
			}
		}
		if fl := c.Flags().Lookup("top"); fl != nil {
			if !strings.Contains(fl.Usage, "0 = all") {
				fl.Usage += " (0 = all)"
			}
		}
		for flag, values := range flagValues[name] {
			if c.Flags().Lookup(flag) != nil {
				c.RegisterFlagCompletionFunc(flag, fixedValues(values))
			}
		}
		if c.Flags().Lookup("rules") != nil {
			c.MarkFlagFilename("rules", "yaml", "yml")
		}
		if c.Flags().Lookup("output") != nil {
			c.MarkFlagFilename("output", "html")
		}
		prev := c.PreRunE
		c.PreRunE = func(cmd *cobra.Command, args []string) error {
			if err := checkTop(cmd); err != nil {
				return err
			}
			if prev != nil {
				return prev(cmd, args)
			}
			return nil
		}
	}
}

// checkTop refuses a negative --top: 0 already means all rows.
func checkTop(cmd *cobra.Command) error {
	fl := cmd.Flags().Lookup("top")
	if fl == nil {
		return nil
	}
	if strings.HasPrefix(fl.Value.String(), "-") {
		return badInput(fmt.Errorf("--top %s: want 0 (all rows) or more", fl.Value.String()))
	}
	return nil
}

func fixedValues(values []string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, v := range values {
			if strings.HasPrefix(v, prefix) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// formatsOf lists a command's formats (for tests and docs).
func formatsOf(name string) []string { return slices.Clone(commandFormats[name]) }

// sizeFlag is a flag holding a size in bytes, written in the one size
// syntax (memtimeline.ParseBytes: 1048576, 512KiB, 64MiB, 1.5GB).
type sizeFlag struct{ p *int64 }

func (f sizeFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return fmt.Sprint(*f.p)
}
func (f sizeFlag) Type() string { return "size" }
func (f sizeFlag) Set(s string) error {
	n, err := memtimeline.ParseBytes(s)
	if err != nil {
		return err
	}
	*f.p = n
	return nil
}

// sizeVar defines a size flag with a default in bytes.
func sizeVar(fs *pflag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var(sizeFlag{p}, name, usage+" (bytes, or 512KiB, 64MiB, 1.5GB)")
}
