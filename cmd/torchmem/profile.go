package main

import (
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startProfiles writes Go pprof profiles of this run when asked through
// the environment, for measuring torchmem itself on a large trace:
//
//	TORCHMEM_CPUPROFILE=cpu.prof TORCHMEM_MEMPROFILE=mem.prof torchmem analyze big.json
//	go tool pprof -top torchmem cpu.prof
//	TORCHMEM_EXECTRACE=exec.trace torchmem ops big.json.gz; go tool trace exec.trace
//
// The execution trace shows what each core ran when, and where one waited
// (a reader behind its inflater, a serial stage on a machine of two cores).
// The heap profile is written at exit: its alloc_space shows what each
// analysis allocated. The returned function stops and writes them.
func startProfiles() (stop func()) {
	memPath := os.Getenv("TORCHMEM_MEMPROFILE")
	cpu := startTo("TORCHMEM_CPUPROFILE", pprof.StartCPUProfile)
	exec := startTo("TORCHMEM_EXECTRACE", trace.Start)
	return func() {
		if exec != nil {
			trace.Stop()
			exec.Close()
		}
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		if memPath != "" {
			f, err := os.Create(memPath)
			if err == nil {
				runtime.GC() // the heap profile is as of the last collection
				err = pprof.WriteHeapProfile(f)
				f.Close()
			}
			if err != nil {
				warn(os.Stderr, "TORCHMEM_MEMPROFILE: %v", err)
			}
		}
	}
}

// startTo starts a recording (start) into the file the environment
// variable env names, if it names one; nil (after a warning) if the file
// cannot be written or the recording not started.
func startTo(env string, start func(io.Writer) error) *os.File {
	path := os.Getenv(env)
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err == nil {
		if err = start(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		warn(os.Stderr, "%s: %v", env, err)
		return nil
	}
	return f
}
