// Command torchmem reads what PyTorch's profiler writes and tells where GPU
// memory went: per-operator tables, allocation sites, leaks, fragmentation.
//
// The command line is the last stage of the pipeline:
//
//	load/        one loader: arguments (files, directories, -) -> typed inputs
//	load.go      the loader as commands use it; rules.Input per file
//	flags.go     one flag vocabulary (--format, --top, completion)
//	<command>.go each command: flags, which kinds it reads, then
//	             report.New and report.Generate (cmd/internal/report,
//	             the one rendering layer: every format from one model)
//
// Every JSON document is described in JSON.md; testdata/cmd/golden holds
// every command's output in every format (go test ./cmd/torchmem -update).
package main
