// Command torchmem-bench measures torchmem on the machine at hand and prints
// every figure of the README's Performance section, with the ratios that
// hold across machines measured in one run.
//
//	go run ./cmd/torchmem-bench                 # ~1 GB trace, ~1 GB snapshot, 3 rounds
//	go run ./cmd/torchmem-bench -quick          # small inputs, one round: a smoke test
//
// It builds torchmem from the clone (or takes -torchmem), writes the tiled
// inputs once into -dir (big_transformer's trace tiled -trace-copies times,
// plain and gzipped; frag_small_allocs' snapshot with its history tiled
// -snapshot-copies times by testdata/snapshots/tile_snapshot.py, plain and
// gzipped), then runs, in alternating rounds, each command as its own
// process: `cat` and `zcat` of the same files (reading and decompressing
// alone), torchmem's own decompressor alone, `ops`, `analyze`, `report`,
// `snapshot` and `analyze` on the snapshot, Python's pickle.load when
// python3 is there, and HTA's TraceAnalysis when it is installed. For each
// it takes the wall time, user and system CPU and peak RSS from wait4's
// rusage, and prints the medians, the ratios of each round and their
// median, and the load average before and after every round. Inputs are
// read from the page cache (each file is read once before the rounds).
package main

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/torchmem/torchmem/chrometrace"
)

type config struct {
	root           string
	dir            string
	torchmem       string
	built          bool // torchmem was built here from root (else given with -torchmem)
	python         string
	traceSource    string // relative to root; "" is big_transformer's trace
	traceCopies    int
	snapshotCopies int
	rounds         int
	pickleRounds   int
	skipTrace      bool
	skipSnapshot   bool
	quick          bool
	out            io.Writer
	log            io.Writer
}

func main() {
	if len(os.Args) >= 3 && strings.HasPrefix(os.Args[1], "-child-") {
		if err := child(os.Args[1], os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "torchmem-bench:", err)
			os.Exit(2)
		}
		return
	}
	c := config{out: os.Stdout, log: os.Stderr}
	flag.StringVar(&c.dir, "dir", filepath.Join(os.TempDir(), "torchmem-bench"), "where the tiled inputs are written once and reused")
	flag.StringVar(&c.torchmem, "torchmem", "", "the torchmem binary to measure (default: built from this clone into -dir)")
	flag.StringVar(&c.python, "python", "python3", `Python for the snapshot tiler, pickle.load and HTA ("" or "none": skip them)`)
	flag.IntVar(&c.traceCopies, "trace-copies", 14, "copies of big_transformer's 76 MB trace (14: about 1 GB)")
	flag.IntVar(&c.snapshotCopies, "snapshot-copies", 125, "copies of frag_small_allocs' history (125: about 1 GB (1056 MB, 1007 MiB), 7.2M entries)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every command once, in turn")
	flag.IntVar(&c.pickleRounds, "pickle-rounds", 1, "rounds that run Python's pickle.load and HTA (slow: 30 s and more each)")
	flag.BoolVar(&c.skipTrace, "no-trace", false, "leave the trace rows out")
	flag.BoolVar(&c.skipSnapshot, "no-snapshot", false, "leave the snapshot rows out")
	flag.BoolVar(&c.quick, "quick", false, "a smoke test: 1 trace copy, 2 snapshot copies, 1 round (flags given explicitly still win)")
	flag.Parse()
	if c.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["trace-copies"] {
			c.traceCopies = 1
		}
		if !set["snapshot-copies"] {
			c.snapshotCopies = 2
		}
		if !set["rounds"] {
			c.rounds = 1
		}
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "torchmem-bench:", err)
		os.Exit(2)
	}
	c.root = root
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "torchmem-bench:", err)
		os.Exit(1)
	}
}

// repoRoot is the clone this runs in: the nearest directory up from the
// working directory whose go.mod is torchmem's.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/torchmem/torchmem\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run it inside a clone of torchmem (no go.mod of github.com/torchmem/torchmem above the working directory)")
		}
		dir = parent
	}
}

// child runs the work that the measuring process must not do itself. A
// child's peak RSS from wait4 is at least the peak of the process that
// started it (Linux keeps the larger of the two across exec), so the
// process that measures keeps its own memory small: the inputs are
// written by children too.
func child(mode string, args []string) error {
	switch {
	case mode == "-child-decompress-only" && len(args) == 1:
		return decompressOnly(args[0])
	case mode == "-child-trace" && len(args) == 3:
		copies, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		return tiledTrace(args[0], args[1], copies)
	case mode == "-child-gzip" && len(args) == 1:
		return gzipCopy(args[0])
	case mode == "-child-gzip-members" && len(args) == 2:
		return gzipMembers(args[0], args[1])
	case mode == "-child-snapshot" && len(args) == 4:
		copies, err := strconv.Atoi(args[3])
		if err != nil {
			return err
		}
		return tiledSnapshot(args[0], args[1], args[2], copies)
	}
	return fmt.Errorf("unknown child mode %s %v", mode, args)
}

// inChild runs torchmem-bench itself with mode and args.
func inChild(self, mode string, args ...string) func() error {
	return func() error {
		cmd := exec.Command(self, append([]string{mode}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
}

// selfHWM is this process's own peak RSS (VmHWM), the floor under every
// child's figure; 0 when unknown.
func selfHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	return 0
}

// decompressOnly reads a file through torchmem's own reader as the trace
// reader does (chrometrace.Open, then Unbuffered: inflated in place into
// 1 MiB buffers when gzipped) and discards the bytes: the decompression
// alone, as torchmem does it at its fastest.
func decompressOnly(path string) error {
	in, err := chrometrace.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	r := in.Unbuffered()
	buf := make([]byte, 1<<20)
	for {
		if _, err := r.Read(buf); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// job is one command measured once per round.
type job struct {
	name   string // what the table calls it
	input  string // which input file (its label)
	argv   []string
	size   int64 // the decompressed input's bytes
	slow   bool  // runs only in the first pickleRounds rounds
	stdout string
}

type sample struct {
	wall, user, sys time.Duration
	maxRSS          int64 // bytes
}

func run(c config) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(c.log, "torchmem-bench: "+format+"\n", args...) }
	if c.torchmem == "" {
		c.built = true
		c.torchmem = filepath.Join(c.dir, "torchmem")
		logf("building %s", c.torchmem)
		build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", c.torchmem, "./cmd/torchmem")
		build.Dir = c.root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	python := ""
	if c.python != "" && c.python != "none" {
		if p, err := exec.LookPath(c.python); err == nil {
			python = p
		}
	}
	hta := python != "" && exec.Command(python, "-c", "import hta.trace_analysis").Run() == nil

	var jobs []job
	var inputs []string
	sizes := map[string]int64{}
	if !c.skipTrace {
		source, name := traceSource, "big"
		if c.traceSource != "" {
			source, name = c.traceSource, filepath.Base(filepath.Dir(c.traceSource))
		}
		trace := filepath.Join(c.dir, fmt.Sprintf("%s%d.json", name, c.traceCopies))
		if err := ensure(trace, logf, inChild(self, "-child-trace", filepath.Join(c.root, source), trace, strconv.Itoa(c.traceCopies))); err != nil {
			return err
		}
		if err := ensure(trace+".gz", logf, inChild(self, "-child-gzip", trace)); err != nil {
			return err
		}
		// The snippet's gzip: members that name their sizes, which
		// torchmem inflates on several cores (internal/gzmembers).
		members := strings.TrimSuffix(trace, ".json") + membersSuffix
		if err := ensure(members, logf, inChild(self, "-child-gzip-members", trace, members)); err != nil {
			return err
		}
		size := fileSize(trace)
		sizes[trace], sizes[trace+".gz"], sizes[members] = size, size, size
		inputs = append(inputs, trace, trace+".gz", members)
		html := filepath.Join(c.dir, "report.html")
		jobs = append(jobs,
			job{name: "cat", input: trace, argv: []string{"cat", trace}, size: size},
			job{name: "ops", input: trace, argv: []string{c.torchmem, "ops", trace}, size: size},
			job{name: "analyze", input: trace, argv: []string{c.torchmem, "analyze", trace}, size: size},
			job{name: "report", input: trace, argv: []string{c.torchmem, "report", trace, "-o", html}, size: size},
			job{name: "zcat", input: trace + ".gz", argv: []string{"zcat", trace + ".gz"}, size: size},
			job{name: "decompress only", input: trace + ".gz", argv: []string{self, "-child-decompress-only", trace + ".gz"}, size: size},
			job{name: "ops", input: trace + ".gz", argv: []string{c.torchmem, "ops", trace + ".gz"}, size: size},
			job{name: "analyze", input: trace + ".gz", argv: []string{c.torchmem, "analyze", trace + ".gz"}, size: size},
			job{name: "report", input: trace + ".gz", argv: []string{c.torchmem, "report", trace + ".gz", "-o", html}, size: size},
			job{name: "decompress only", input: members, argv: []string{self, "-child-decompress-only", members}, size: size},
			job{name: "ops", input: members, argv: []string{c.torchmem, "ops", members}, size: size},
			job{name: "analyze", input: members, argv: []string{c.torchmem, "analyze", members}, size: size},
		)
		if hta {
			htaDir := filepath.Join(c.dir, fmt.Sprintf("hta%d", c.traceCopies))
			os.MkdirAll(htaDir, 0o755)
			link := filepath.Join(htaDir, filepath.Base(trace)+".gz")
			os.Remove(link)
			if err := os.Symlink(trace+".gz", link); err != nil {
				return err
			}
			jobs = append(jobs, job{name: "HTA TraceAnalysis", input: trace + ".gz", slow: true, size: size,
				argv: []string{python, "-c", "import sys\nfrom hta.trace_analysis import TraceAnalysis\nTraceAnalysis(trace_dir=sys.argv[1])", htaDir}})
		}
	}
	if !c.skipSnapshot {
		if python == "" {
			logf("no python3: the snapshot rows need it to tile the snapshot (testdata/snapshots/tile_snapshot.py); left out")
		} else {
			snap := filepath.Join(c.dir, fmt.Sprintf("big%d.pickle", c.snapshotCopies))
			if err := ensure(snap, logf, inChild(self, "-child-snapshot", c.root, python, snap, strconv.Itoa(c.snapshotCopies))); err != nil {
				return err
			}
			if err := ensure(snap+".gz", logf, inChild(self, "-child-gzip", snap)); err != nil {
				return err
			}
			size := fileSize(snap)
			sizes[snap], sizes[snap+".gz"] = size, size
			inputs = append(inputs, snap, snap+".gz")
			jobs = append(jobs,
				job{name: "cat", input: snap, argv: []string{"cat", snap}, size: size},
				job{name: "snapshot", input: snap, argv: []string{c.torchmem, "snapshot", snap}, size: size},
				job{name: "analyze", input: snap, argv: []string{c.torchmem, "analyze", snap}, size: size},
				job{name: "zcat", input: snap + ".gz", argv: []string{"zcat", snap + ".gz"}, size: size},
				job{name: "decompress only", input: snap + ".gz", argv: []string{self, "-child-decompress-only", snap + ".gz"}, size: size},
				job{name: "snapshot", input: snap + ".gz", argv: []string{c.torchmem, "snapshot", snap + ".gz"}, size: size},
				job{name: "analyze", input: snap + ".gz", argv: []string{c.torchmem, "analyze", snap + ".gz"}, size: size},
				job{name: "pickle.load", input: snap, slow: true, size: size,
					argv: []string{python, "-c", "import pickle, sys\nwith open(sys.argv[1], 'rb') as f: pickle.load(f)", snap}},
			)
		}
	}
	if len(jobs) == 0 {
		return errors.New("nothing to measure")
	}
	// Into the page cache.
	for _, in := range inputs {
		if f, err := os.Open(in); err == nil {
			io.Copy(io.Discard, f)
			f.Close()
		}
	}

	w := c.out
	fmt.Fprintf(w, "torchmem-bench: %s\n", machine())
	fmt.Fprintf(w, "torchmem %s; %s\n", version(c.torchmem), commit(c.root, c.torchmem, c.built))
	for _, in := range inputs {
		st, _ := os.Stat(in)
		fmt.Fprintf(w, "input %s: %s on disk, %s decompressed\n", filepath.Base(in), mib(st.Size()), mib(sizes[in]))
	}
	if python == "" {
		fmt.Fprintln(w, "python3: not found (no pickle.load, no HTA)")
	} else if !hta {
		fmt.Fprintf(w, "HTA: not installed for %s (no HTA row)\n", python)
	}

	samples := make([][]sample, len(jobs)) // per job, per round (zero: not run)
	var loads []string
	for r := range c.rounds {
		before := loadavg()
		for i, j := range jobs {
			if j.slow && r >= c.pickleRounds {
				samples[i] = append(samples[i], sample{})
				continue
			}
			s, err := measure(j.argv)
			if err != nil {
				return fmt.Errorf("%s %s: %w", j.name, filepath.Base(j.input), err)
			}
			samples[i] = append(samples[i], s)
			// Each measurement as it comes, so that an interrupted run still tells.
			logf("round %d: %s %s: wall %.2f s, user %.2f s, sys %.2f s, peak RSS %s", r+1, j.name, filepath.Base(j.input),
				s.wall.Seconds(), s.user.Seconds(), s.sys.Seconds(), mib(s.maxRSS))
		}
		loads = append(loads, fmt.Sprintf("round %d: %s -> %s", r+1, before, loadavg()))
	}
	fmt.Fprintf(w, "load average (1, 5, 15 min) %s\n", strings.Join(loads, "; "))
	if hwm := selfHWM(); hwm > 0 {
		fmt.Fprintf(w, "peak RSS floor: %s (this process's own peak, which Linux reports for a child that stays under it)\n", mib(hwm))
	}
	fmt.Fprintln(w)
	printTable(w, jobs, samples)
	fmt.Fprintln(w)
	printRatios(w, jobs, samples, c.rounds)
	return nil
}

// measure runs argv once, stdout discarded, and returns its rusage.
func measure(argv []string) (sample, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return sample{}, err
	}
	defer null.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = null
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	var ee *exec.ExitError
	// torchmem exits 1 on findings (the tiled inputs have some): a verdict, not a failure.
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1 && strings.Contains(argv[0], "torchmem")) {
		return sample{}, fmt.Errorf("%v\n%s", err, tail(stderr.String(), 2000))
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return sample{}, errors.New("no rusage on this platform")
	}
	rss := ru.Maxrss
	if runtime.GOOS == "linux" {
		rss *= 1024 // KiB on Linux, bytes on macOS
	}
	return sample{
		wall:   wall,
		user:   time.Duration(ru.Utime.Nano()),
		sys:    time.Duration(ru.Stime.Nano()),
		maxRSS: rss,
	}, nil
}

func printTable(w io.Writer, jobs []job, samples [][]sample) {
	fmt.Fprintln(w, "| command | input | runs | wall | MiB/s | user CPU | sys CPU | MiB per user CPU-s | peak RSS | RSS / input |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for i, j := range jobs {
		ran := ranSamples(samples[i])
		if len(ran) == 0 {
			continue
		}
		wall := median(ran, func(s sample) float64 { return s.wall.Seconds() })
		user := median(ran, func(s sample) float64 { return s.user.Seconds() })
		sys := median(ran, func(s sample) float64 { return s.sys.Seconds() })
		rss := median(ran, func(s sample) float64 { return float64(s.maxRSS) })
		m := float64(j.size) / (1 << 20)
		fmt.Fprintf(w, "| %s | %s | %d | %.2f s | %.0f | %.2f s | %.2f s | %.0f | %.0f MiB | %.1f%% |\n",
			j.name, inputLabel(j.input), len(ran), wall, m/wall, user, sys, m/max(user, 1e-3), rss/(1<<20), 100*rss/float64(j.size))
	}
}

// ratio is one comparison: a over b, of a quantity, per round.
type ratio struct {
	what   string
	a, b   int // job indexes
	of     func(sample) float64
	invert bool // print b/a (a speed share) instead of a/b
	// scale, when set, multiplies the ratio, which is then capped at 1
	// (a bound on a share).
	scale float64
}

func printRatios(w io.Writer, jobs []job, samples [][]sample, rounds int) {
	// By the input's kind as the table labels it: ".json.gz" is not
	// ".members.json.gz", whatever the jobs' order.
	find := func(name, suffix string) int {
		for i, j := range jobs {
			if j.name == name && inputLabel(j.input) == "`"+suffix+"`" {
				return i
			}
		}
		return -1
	}
	wall := func(s sample) float64 { return s.wall.Seconds() }
	user := func(s sample) float64 { return s.user.Seconds() }
	rss := func(s sample) float64 { return float64(s.maxRSS) }
	cpu := func(s sample) float64 { return (s.user + s.sys).Seconds() }
	cpus := float64(runtime.GOMAXPROCS(0))
	rs := []ratio{
		{"analyze / ops, wall, .json", find("analyze", ".json"), find("ops", ".json"), wall, false, 0},
		{"analyze / ops, user CPU, .json", find("analyze", ".json"), find("ops", ".json"), user, false, 0},
		{"analyze / ops, wall, .json.gz", find("analyze", ".json.gz"), find("ops", ".json.gz"), wall, false, 0},
		{"ops .json.gz / ops .json, wall", find("ops", ".json.gz"), find("ops", ".json"), wall, false, 0},
		{"ops / cat, wall, .json", find("ops", ".json"), find("cat", ".json"), wall, false, 0},
		{"ops .json.gz speed as a share of zcat's (zcat wall / ops wall)", find("ops", ".json.gz"), find("zcat", ".json.gz"), wall, true, 0},
		{"ops .json.gz speed as a share of torchmem's decompression alone", find("ops", ".json.gz"), find("decompress only", ".json.gz"), wall, true, 0},
		// One gzip stream inflates on one core while the rest of the
		// work shares all of them: ops's wall is at least its CPU time
		// over the CPUs, so its share of the decompression's speed is at
		// most CPUs x decompression CPU / ops CPU.
		{fmt.Sprintf("bound on that share on %.0f CPUs (CPUs x decompression CPU / ops CPU, user+sys)", cpus), find("ops", ".json.gz"), find("decompress only", ".json.gz"), cpu, true, cpus},
		{"analyze .json.gz speed as a share of zcat's", find("analyze", ".json.gz"), find("zcat", ".json.gz"), wall, true, 0},
		// The snippet's members inflate on several cores where there
		// are more than 2: the yardsticks are then the plain JSON and
		// one stream's inflating.
		{"ops " + membersSuffix + " / ops .json, wall", find("ops", membersSuffix), find("ops", ".json"), wall, false, 0},
		{"analyze " + membersSuffix + " / analyze .json, wall", find("analyze", membersSuffix), find("analyze", ".json"), wall, false, 0},
		{"ops " + membersSuffix + " speed as a share of one stream's decompression alone (.json.gz)", find("ops", membersSuffix), find("decompress only", ".json.gz"), wall, true, 0},
		{"torchmem's decompression alone / zcat, wall", find("decompress only", ".json.gz"), find("zcat", ".json.gz"), wall, false, 0},
		{"HTA TraceAnalysis / analyze, wall, .json.gz", find("HTA TraceAnalysis", ".json.gz"), find("analyze", ".json.gz"), wall, false, 0},
		{"HTA TraceAnalysis / analyze, peak RSS", find("HTA TraceAnalysis", ".json.gz"), find("analyze", ".json.gz"), rss, false, 0},
		{"snapshot .pickle.gz speed as a share of zcat's", find("snapshot", ".pickle.gz"), find("zcat", ".pickle.gz"), wall, true, 0},
		{"analyze / snapshot, wall, .pickle", find("analyze", ".pickle"), find("snapshot", ".pickle"), wall, false, 0},
		{"pickle.load / snapshot, wall, .pickle", find("pickle.load", ".pickle"), find("snapshot", ".pickle"), wall, false, 0},
		{"pickle.load / snapshot, peak RSS", find("pickle.load", ".pickle"), find("snapshot", ".pickle"), rss, false, 0},
	}
	fmt.Fprintln(w, "Ratios, each from the two commands of one round (median, then every round):")
	for _, r := range rs {
		if r.a < 0 || r.b < 0 {
			continue
		}
		var per []float64
		for k := range rounds {
			sa, sb := samples[r.a][k], samples[r.b][k]
			if sa.wall == 0 || sb.wall == 0 || r.of(sb) == 0 || r.of(sa) == 0 {
				continue
			}
			v := r.of(sa) / r.of(sb)
			if r.invert {
				v = 1 / v
			}
			if r.scale > 0 {
				v = min(v*r.scale, 1)
			}
			per = append(per, v)
		}
		if len(per) == 0 {
			continue
		}
		format := func(v float64) string {
			if r.invert {
				return fmt.Sprintf("%.0f%%", 100*v)
			}
			return fmt.Sprintf("%.2fx", v)
		}
		parts := make([]string, len(per))
		for k, v := range per {
			parts[k] = format(v)
		}
		med := median(per, func(v float64) float64 { return v })
		fmt.Fprintf(w, "  %s: %s (%s)\n", r.what, format(med), strings.Join(parts, ", "))
	}
	fmt.Fprintln(w, "Peak RSS as a share of the decompressed input (median):")
	for _, name := range []string{"ops", "analyze", "report", "snapshot"} {
		for _, suffix := range []string{".json", ".json.gz", membersSuffix, ".pickle", ".pickle.gz"} {
			i := find(name, suffix)
			if i < 0 {
				continue
			}
			ran := ranSamples(samples[i])
			if len(ran) == 0 {
				continue
			}
			fmt.Fprintf(w, "  %s %s: %.1f%%\n", name, suffix, 100*median(ran, rss)/float64(jobs[i].size))
		}
	}
}

func ranSamples(ss []sample) []sample {
	var out []sample
	for _, s := range ss {
		if s.wall > 0 {
			out = append(out, s)
		}
	}
	return out
}

func median[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	slices.Sort(vs)
	n := len(vs)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

func inputLabel(path string) string {
	base := filepath.Base(path)
	for _, ext := range []string{membersSuffix, ".json.gz", ".pickle.gz", ".json", ".pickle"} {
		if strings.HasSuffix(base, ext) {
			return "`" + ext + "`"
		}
	}
	return base
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		out, err := exec.Command("uptime").Output()
		if err != nil {
			return "unknown"
		}
		s := string(out)
		if i := strings.Index(s, "load average"); i >= 0 {
			return strings.TrimSpace(s[i:])
		}
		return strings.TrimSpace(s)
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func machine() string {
	cpu := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB memory", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d CPUs (%s)%s, %s/%s, %s, %s", cpu, runtime.NumCPU(), "GOMAXPROCS "+fmt.Sprint(runtime.GOMAXPROCS(0)), mem,
		runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "unknown"
	}
	return f[len(f)-1]
}

// commit names the commit of the binary measured: the clone's when the
// bench built it, else the binary's own VCS stamp, if it has one (a
// binary given with -torchmem need not come from the clone at hand).
func commit(root, bin string, built bool) string {
	if !built {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			return "commit unknown"
		}
		rev, modified := "", ""
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = "-dirty"
				}
			}
		}
		if rev == "" {
			return "commit unknown (" + filepath.Base(bin) + " carries no VCS stamp)"
		}
		return "commit " + rev[:min(len(rev), 7)] + modified
	}
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "commit unknown"
	}
	return "commit " + strings.TrimSpace(string(out))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
