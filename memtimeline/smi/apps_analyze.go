package smi

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/torchmem/torchmem/memtimeline"
)

// What a compute-apps log tells that the GPU log cannot: which process
// holds the memory, which one grows, which ones share a GPU, and which one
// sits on memory after the others are gone (a zombie from the last run).

// ProcessReport is one process on one GPU.
type ProcessReport struct {
	PID  int64  `json:"pid"`
	Name string `json:"name"`
	// GPU is the GPU as the compute-apps log names it (UUID or bus id);
	// GPUKey the GPU log's key for it, "" when there is no GPU log or the
	// two cannot be matched.
	GPU    string `json:"gpu,omitempty"`
	GPUKey string `json:"gpu_key,omitempty"`

	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
	Samples int       `json:"samples"`
	// PeakBytes and FinalBytes are -1 when nvidia-smi could not read the
	// process's memory ([N/A]).
	PeakBytes  int64 `json:"peak_bytes"`
	FinalBytes int64 `json:"final_bytes"`
	// Exited: the process was gone before the logs ended.
	Exited bool `json:"exited"`
	// Grows is the process's steady growth, judged as memory.used is
	// (a leak in that process), or nil.
	Grows *GrowthRun `json:"grows,omitempty"`
	// StillGrowing is growth too short to judge that was still going on
	// when the process exited or the log ended (see GPUReport.StillGrowing).
	StillGrowing *GrowthRun `json:"still_growing,omitempty"`
	// Zombie: the process held its memory, unchanged, to the end of the
	// log after the others on its GPU exited, or with the GPU idle.
	Zombie       bool      `json:"zombie,omitempty"`
	ZombieSince  time.Time `json:"zombie_since,omitempty"`
	ZombieReason string    `json:"zombie_reason,omitempty"`
}

// Sharing is a stretch of time in which several processes held memory
// on one GPU at once.
type Sharing struct {
	GPU    string `json:"gpu,omitempty"`
	GPUKey string `json:"gpu_key,omitempty"`
	// Start and End are the first and last sampling rounds of the stretch
	// (zero without timestamps); Rounds how many rounds it spans.
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Rounds int       `json:"rounds"`
	// PIDs are every process seen in the stretch, MaxProcesses the most at
	// one time, PeakBytes the most they held together.
	PIDs         []int64 `json:"pids"`
	MaxProcesses int     `json:"max_processes"`
	PeakBytes    int64   `json:"peak_bytes"`
}

// AppsAnalysis is what AnalyzeApps finds.
type AppsAnalysis struct {
	// Processes in order of first appearance.
	Processes []ProcessReport `json:"processes"`
	Sharing   []Sharing       `json:"sharing,omitempty"`
	// Unaccounted is, per GPU of the GPU log, the median of memory.used
	// minus the processes' memory at the same times: memory no process
	// holds (the driver's own); absent without a GPU log.
	Unaccounted []Unaccounted `json:"unaccounted,omitempty"`
	// Interval is the median time between sampling rounds.
	Interval time.Duration `json:"interval_ns"`
}

// Unaccounted is memory.used not held by any process, on one GPU.
type Unaccounted struct {
	GPUKey string `json:"gpu_key"`
	Bytes  int64  `json:"bytes"`
	// Samples is how many rounds the median rests on.
	Samples int `json:"samples"`
}

// Zombies returns the processes judged zombies.
func (a AppsAnalysis) Zombies() []ProcessReport {
	var out []ProcessReport
	for _, p := range a.Processes {
		if p.Zombie {
			out = append(out, p)
		}
	}
	return out
}

// Process returns the report of pid (on any GPU), or nil.
func (a AppsAnalysis) Process(pid int64) *ProcessReport {
	for i := range a.Processes {
		if a.Processes[i].PID == pid {
			return &a.Processes[i]
		}
	}
	return nil
}

// normBusID makes "00000000:19:00.0" and "0000:19:00.0" compare equal.
func normBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = strings.TrimLeft(s[:i], "0") + s[i:]
	}
	return s
}

// GPUKeyOf maps a compute-apps GPU (UUID or bus id) to the key of a GPU
// in log: by UUID, by bus id, or, when each log names one GPU, that one.
func GPUKeyOf(log *Log, uuid, bus string, appsGPUs int) string {
	return newGPUKeys(log).of(uuid, bus, appsGPUs)
}

// gpuKeys indexes a GPU log's GPUs by UUID and bus id, built once for all
// the processes of an apps log.
type gpuKeys struct {
	log    *Log
	byUUID map[string]string
	byBus  map[string]string
}

func newGPUKeys(log *Log) gpuKeys {
	k := gpuKeys{log: log, byUUID: map[string]string{}, byBus: map[string]string{}}
	if log == nil {
		return k
	}
	for _, g := range log.GPUs {
		if u := strings.ToLower(g.UUID); u != "" {
			if _, dup := k.byUUID[u]; !dup {
				k.byUUID[u] = g.Key
			}
		}
		if b := normBusID(g.BusID); b != "" {
			if _, dup := k.byBus[b]; !dup {
				k.byBus[b] = g.Key
			}
		}
	}
	return k
}

func (k gpuKeys) of(uuid, bus string, appsGPUs int) string {
	if k.log == nil {
		return ""
	}
	if key, ok := k.byUUID[strings.ToLower(uuid)]; ok && uuid != "" {
		return key
	}
	if key, ok := k.byBus[normBusID(bus)]; ok && bus != "" {
		return key
	}
	if len(k.log.GPUs) == 1 && appsGPUs <= 1 {
		return k.log.GPUs[0].Key
	}
	return ""
}

// AnalyzeApps measures every process of apps; gpus (may be nil) is the
// GPU log of the same machine and time, for the GPU's end of log, its
// utilization and its memory.used.
func AnalyzeApps(apps *AppsLog, gpus *Log, opts Options) AppsAnalysis {
	var a AppsAnalysis
	if apps == nil {
		return a
	}
	a.Interval = roundInterval(apps, gpus)
	distinct := map[string]bool{}
	for _, p := range apps.Processes {
		distinct[p.GPU] = true
	}
	// The end of the observation: the GPU log usually runs on after the
	// last process is gone (the apps log prints nothing then).
	end := time.Time{}
	if apps.HasTime && len(apps.RoundTimes) > 0 {
		end = apps.RoundTimes[len(apps.RoundTimes)-1]
		for _, t := range apps.RoundTimes {
			if t.After(end) {
				end = t
			}
		}
	}
	if gpus != nil {
		for _, g := range gpus.GPUs {
			if n := len(g.Samples); n > 0 && g.Samples[n-1].Time.After(end) {
				end = g.Samples[n-1].Time
			}
		}
	}
	lastRound := apps.Rounds - 1
	keys := newGPUKeys(gpus)
	for _, p := range apps.Processes {
		r := ProcessReport{PID: p.PID, Name: p.Name, GPU: p.GPU, Samples: len(p.Samples), PeakBytes: -1, FinalBytes: -1}
		r.GPUKey = keys.of(p.GPUUUID, p.GPUBusID, len(distinct))
		if len(p.Samples) > 0 {
			r.First, r.Last = p.Samples[0].Time, p.Samples[len(p.Samples)-1].Time
			if apps.HasTime {
				r.Exited = end.Sub(r.Last) > 2*a.Interval
			} else {
				r.Exited = p.Samples[len(p.Samples)-1].Round < lastRound
			}
		}
		for _, s := range p.Samples {
			if s.UsedBytes >= 0 {
				r.PeakBytes = max(r.PeakBytes, s.UsedBytes)
				r.FinalBytes = s.UsedBytes
			}
		}
		if apps.HasTime {
			r.Grows, r.StillGrowing = processGrowth(p, opts)
		}
		a.Processes = append(a.Processes, r)
	}
	a.Sharing = sharing(apps, a.Processes)
	if apps.HasTime {
		markZombies(apps, gpus, &a, end, opts)
		a.Unaccounted = unaccounted(apps, gpus, a.Processes, a.Interval)
	}
	return a
}

// roundInterval is the median time between sampling rounds (of the GPU
// log when the apps log has no times).
func roundInterval(apps *AppsLog, gpus *Log) time.Duration {
	if len(apps.RoundTimes) > 1 {
		var s []Sample
		for _, t := range apps.RoundTimes {
			s = append(s, Sample{Time: t})
		}
		return medianInterval(s)
	}
	if gpus != nil && len(gpus.GPUs) > 0 {
		return medianInterval(gpus.GPUs[0].Samples)
	}
	return time.Second
}

// processGrowth judges one process's memory like a GPU's memory.used:
// a leak, or growth still going on when it exited.
func processGrowth(p *Process, opts Options) (leak, still *GrowthRun) {
	s := make([]Sample, 0, len(p.Samples))
	for _, x := range p.Samples {
		s = append(s, Sample{Time: x.Time, UsedBytes: x.UsedBytes, TotalBytes: -1, UtilGPUPct: -1, UtilMemoryPct: -1})
	}
	runs, leaks := findGrowthRuns(s, opts, opts.JitterBytes)
	if len(leaks) > 0 {
		return &leaks[0], nil
	}
	return nil, stillGrowing(s, runs)
}

// sharing finds, per GPU, the runs of consecutive rounds in which at least
// two processes held memory on it. It visits each row once (plus a sort of
// each GPU's rounds): a log may hold many GPUs and millions of rounds.
func sharing(apps *AppsLog, reports []ProcessReport) []Sharing {
	type entry struct {
		proc  int
		bytes int64
	}
	byGPU := map[string]map[int][]entry{}
	times := map[int]time.Time{}
	var gpus []string
	for i, p := range apps.Processes {
		rounds := byGPU[p.GPU]
		if rounds == nil {
			rounds = map[int][]entry{}
			byGPU[p.GPU] = rounds
			gpus = append(gpus, p.GPU)
		}
		for _, s := range p.Samples {
			rounds[s.Round] = append(rounds[s.Round], entry{i, max(s.UsedBytes, 0)})
			times[s.Round] = s.Time
		}
	}
	var out []Sharing
	for _, gpu := range gpus {
		rounds := byGPU[gpu]
		var shared []int
		// Processes, not rows: a process listed twice in one round (two
		// contexts, a log concatenated with itself) does not share a GPU
		// with itself.
		seen := map[int]bool{}
		distinct := func(es []entry) int {
			clear(seen)
			for _, e := range es {
				seen[e.proc] = true
			}
			return len(seen)
		}
		for r, es := range rounds {
			if len(es) >= 2 && distinct(es) >= 2 {
				shared = append(shared, r)
			}
		}
		sort.Ints(shared)
		var cur *Sharing
		pids := map[int64]bool{}
		closeIt := func() {
			if cur == nil {
				return
			}
			for pid := range pids {
				cur.PIDs = append(cur.PIDs, pid)
			}
			sort.Slice(cur.PIDs, func(i, j int) bool { return cur.PIDs[i] < cur.PIDs[j] })
			out = append(out, *cur)
			cur = nil
			clear(pids)
		}
		prev := -2
		for _, round := range shared {
			if round != prev+1 {
				closeIt()
			}
			prev = round
			es := rounds[round]
			if cur == nil {
				cur = &Sharing{GPU: gpu, GPUKey: reports[es[0].proc].GPUKey, Start: times[round]}
			}
			cur.End = times[round]
			cur.Rounds++
			cur.MaxProcesses = max(cur.MaxProcesses, distinct(es))
			var sum int64
			for _, e := range es {
				pids[apps.Processes[e.proc].PID] = true
				sum += e.bytes
			}
			cur.PeakBytes = max(cur.PeakBytes, sum)
		}
		closeIt()
	}
	return out
}

// markZombies judges each process still there at the end of the logs. It
// is a zombie when its memory stayed the same (within the jitter) to the
// end for at least ZombieMinDuration after another process on its GPU
// exited, or for at least MinStarveDuration with the GPU idle (the GPU
// log's utilization.gpu at 0% throughout: a training process, even one
// starved for input, shows some use within seconds).
func markZombies(apps *AppsLog, gpus *Log, a *AppsAnalysis, end time.Time, opts Options) {
	lastExit := map[string]int{} // GPU -> the process that exited last on it
	for k, o := range a.Processes {
		if j, ok := lastExit[o.GPU]; o.Exited && (!ok || o.Last.After(a.Processes[j].Last)) {
			lastExit[o.GPU] = k
		}
	}
	for i := range a.Processes {
		r := &a.Processes[i]
		p := apps.Processes[i]
		if r.Exited || len(p.Samples) == 0 || r.FinalBytes <= 0 {
			continue
		}
		// The flat tail: back from the last sample while memory stays within
		// the jitter of its final value.
		last := p.Samples[len(p.Samples)-1]
		k := len(p.Samples) - 1
		for k > 0 {
			v := p.Samples[k-1].UsedBytes
			if v < 0 || abs64(v-last.UsedBytes) > opts.JitterBytes {
				break
			}
			k--
		}
		flatFrom := p.Samples[k].Time
		// (a) it outlived another process on its GPU that exited while it
		// sat still (the last to exit: lastExit, computed once per GPU).
		var left *ProcessReport
		if k, ok := lastExit[r.GPU]; ok && !a.Processes[k].Last.Before(flatFrom) {
			left = &a.Processes[k]
		}
		if left != nil && end.Sub(left.Last) >= opts.ZombieMinDuration {
			r.Zombie, r.ZombieSince = true, left.Last
			r.ZombieReason = fmt.Sprintf("kept %s, unchanged, for %s after %s exited",
				memtimeline.FormatBytes(r.FinalBytes), roundDuration(end.Sub(left.Last)), ProcessRef(left.PID, left.Name))
		}
		// (b) the GPU idle while it held memory.
		if g := gpuOf(gpus, r.GPUKey); g != nil {
			idleFrom, ok := idleSince(g.Samples, flatFrom, 0)
			if ok && end.Sub(idleFrom) >= opts.ZombieMinDuration {
				idle := fmt.Sprintf("the GPU idle (0%% utilization) for the last %s", roundDuration(end.Sub(idleFrom)))
				switch {
				case r.Zombie:
					r.ZombieReason += ", with " + idle
				case end.Sub(idleFrom) >= opts.MinStarveDuration:
					r.Zombie, r.ZombieSince = true, idleFrom
					r.ZombieReason = fmt.Sprintf("held %s, unchanged, with %s", memtimeline.FormatBytes(r.FinalBytes), idle)
				}
			}
		}
	}
}

// idleSince returns the start of the GPU's last stretch of utilization at
// most pct, not before from; ok is false when the GPU was busy at the end
// or utilization was not logged.
func idleSince(s []Sample, from time.Time, pct float64) (time.Time, bool) {
	var since time.Time
	ok := false
	for i := len(s) - 1; i >= 0; i-- {
		x := s[i]
		if x.Time.Before(from) {
			break
		}
		if x.UtilGPUPct < 0 || x.UtilGPUPct > pct {
			break
		}
		since, ok = x.Time, true
	}
	return since, ok
}

// unaccounted compares memory.used with the processes' sum at each apps
// round, per GPU of the GPU log, taking the GPU sample nearest in time.
func unaccounted(apps *AppsLog, gpus *Log, reports []ProcessReport, interval time.Duration) []Unaccounted {
	if gpus == nil {
		return nil
	}
	// The processes' sum per GPU and round, in one pass over the rows.
	sumsOf := map[string]map[int]int64{}
	for i, p := range apps.Processes {
		key := reports[i].GPUKey
		if key == "" {
			continue
		}
		if sumsOf[key] == nil {
			sumsOf[key] = map[int]int64{}
		}
		for _, s := range p.Samples {
			if s.UsedBytes >= 0 {
				sumsOf[key][s.Round] += s.UsedBytes
			}
		}
	}
	var out []Unaccounted
	for _, g := range gpus.GPUs {
		sums := sumsOf[g.Key]
		var diffs []int64
		for round, sum := range sums {
			t := apps.RoundTimes[round]
			j := nearestSample(g.Samples, t)
			if j < 0 || absDuration(g.Samples[j].Time.Sub(t)) > interval/2 || g.Samples[j].UsedBytes < 0 {
				continue
			}
			// Only where the GPU's memory is steady around the round: a
			// process allocating between the two queries is not a gap.
			if !steadyAround(g.Samples, j, 0) {
				continue
			}
			diffs = append(diffs, g.Samples[j].UsedBytes-sum)
		}
		if len(diffs) == 0 {
			continue
		}
		out = append(out, Unaccounted{GPUKey: g.Key, Bytes: median64(diffs), Samples: len(diffs)})
	}
	return out
}

// steadyAround reports whether memory.used at j equals its neighbours'
// (within tol).
func steadyAround(s []Sample, j int, tol int64) bool {
	for _, k := range []int{j - 1, j + 1} {
		if k >= 0 && k < len(s) && (s[k].UsedBytes < 0 || abs64(s[k].UsedBytes-s[j].UsedBytes) > tol) {
			return false
		}
	}
	return true
}

// nearestSample is the index of the sample nearest t (s sorted), -1 when
// s is empty.
func nearestSample(s []Sample, t time.Time) int {
	if len(s) == 0 {
		return -1
	}
	i := sort.Search(len(s), func(i int) bool { return !s[i].Time.Before(t) })
	switch {
	case i == 0:
		return 0
	case i == len(s):
		return len(s) - 1
	case t.Sub(s[i-1].Time) <= s[i].Time.Sub(t):
		return i - 1
	}
	return i
}

func median64(v []int64) int64 {
	v = append([]int64(nil), v...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2]
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// baseName is a process name without its directory ("/usr/bin/python3"
// -> "python3").
// ProcessName is a process's name as the answer gives it: the program, not
// its path ("" when the log has no process_name column).
func ProcessName(s string) string {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 && i+1 < len(s) {
		return s[i+1:]
	}
	return s
}

// ProcessRef names a process in a sentence: "pid 583 (python3)", or
// "pid 583" when the log gives no name.
func ProcessRef(pid int64, name string) string {
	if n := ProcessName(name); n != "" {
		return fmt.Sprintf("pid %d (%s)", pid, n)
	}
	return fmt.Sprintf("pid %d", pid)
}

// gpuOf is log's GPU key, or nil (no log, no key).
func gpuOf(log *Log, key string) *GPU {
	if log == nil || key == "" {
		return nil
	}
	return log.GPU(key)
}
