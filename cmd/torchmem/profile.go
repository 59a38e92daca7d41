package main

import (
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
	cpuPath, memPath := os.Getenv("TORCHMEM_CPUPROFILE"), os.Getenv("TORCHMEM_MEMPROFILE")
	var cpu *os.File
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			warn(os.Stderr, "TORCHMEM_CPUPROFILE: %v", err)
		} else {
			cpu = f
		}
	}
	var exec *os.File
	if tracePath := os.Getenv("TORCHMEM_EXECTRACE"); tracePath != "" {
		f, err := os.Create(tracePath)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			warn(os.Stderr, "TORCHMEM_EXECTRACE: %v", err)
		} else {
			exec = f
		}
	}
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
