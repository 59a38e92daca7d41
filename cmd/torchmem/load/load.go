// Package load is torchmem's one loader: it turns command-line arguments
// (files, directories, "-" for stdin) into parsed inputs. Each input is
// opened once: the reader is buffered, gzip is recognized by its magic
// bytes, and the kind is decided from the first bytes (a peek, not a
// reopen), so pipes, FIFOs, /dev/stdin and <(...) work like files. The
// content tests live next to each parser (chrometrace.LooksLikeTrace,
// snapshot.LooksLike, smi.LooksLike, steplog.LooksLike, ...); this package
// only orders them.
//
// It sits in cmd/torchmem because it is the command line's front end and
// depends on every parser package (chrometrace, the memtimeline readers), which cannot
// import one another's callers; the rules package gets what it loads.
package load

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/internal/crash"
	"github.com/torchmem/torchmem/internal/more"
	"github.com/torchmem/torchmem/internal/rankname"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/digest"
	"golang.org/x/sync/errgroup"
)

// Kind is what an input holds, decided from its content.
type Kind string

const (
	Trace    Kind = "trace"
	Snapshot Kind = "snapshot"
	SMI      Kind = "nvidia-smi"
	// SMIApps is nvidia-smi --query-compute-apps: memory per process.
	SMIApps  Kind = "nvidia-smi-apps"
	Steps    Kind = "steps"
	Timeline Kind = "memory-timeline"
	Summary  Kind = "memory-summary"
	// Summarized is a summary torchmem summarize wrote of one of the
	// kinds above (package rules/digest).
	Summarized Kind = "torchmem-summary"
	Unknown    Kind = "unknown"
)

// AllKinds are the kinds torchmem reads, in the order they are tested.
var AllKinds = []Kind{Summarized, Snapshot, SMI, SMIApps, Steps, Summary, Timeline, Trace}

// Describe names a kind for messages ("a Kineto trace").
func (k Kind) Describe() string {
	switch k {
	case Trace:
		return "a Kineto trace"
	case Snapshot:
		return "an allocator snapshot"
	case SMI:
		return "an nvidia-smi log"
	case SMIApps:
		return "an nvidia-smi per-process log (--query-compute-apps)"
	case Steps:
		return "a per-step memory log"
	case Timeline:
		return "an export_memory_timeline file"
	case Summary:
		return "a memory_summary() log"
	case Summarized:
		return "a torchmem summary"
	}
	return "a file torchmem does not read"
}

// sniffers test the head of an input, most specific first: a pickle by
// its opcode, line formats before JSON objects (a steps line is one), a
// trace last; a torchmem summary, a JSON object whose first key says so,
// before all.
var sniffers = []struct {
	kind  Kind
	looks func([]byte) bool
}{
	{Summarized, digest.LooksLike},
	{Snapshot, snapshot.LooksLike},
	{SMI, smi.LooksLike},
	{SMIApps, smi.LooksLikeApps},
	{Steps, steplog.LooksLike},
	{Summary, memsummary.LooksLike},
	{Timeline, exported.LooksLike},
	{Trace, chrometrace.LooksLikeTrace},
}

// SniffBytes is how much of an input (decompressed) decides its kind.
const SniffBytes = 64 << 10

// Sniff says what head, the first decompressed bytes of an input, holds.
func Sniff(head []byte) Kind {
	for _, s := range sniffers {
		if s.looks(head) {
			return s.kind
		}
	}
	return Unknown
}

// Stdin is the argument that means standard input.
const Stdin = "-"

// Error is a problem with one input; it always names the file.
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string {
	name := e.Path
	if name == Stdin {
		name = "stdin"
	}
	msg := e.Err.Error()
	if strings.HasPrefix(msg, name+":") || strings.HasPrefix(msg, name+" ") {
		return msg
	}
	return name + ": " + msg
}

func (e *Error) Unwrap() error { return e.Err }

// FileError names path in err once, with a plain reason for the usual
// open failures.
func FileError(path string, err error) error {
	var le *Error
	if errors.As(err, &le) {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = errors.New("no such file")
	case errors.Is(err, fs.ErrPermission):
		err = errors.New("permission denied")
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
	}
	return &Error{Path: path, Err: err}
}

// Reader is one opened input: decompressed, buffered, its kind sniffed.
type Reader struct {
	*chrometrace.Input
	Path string
	Kind Kind
	// Size is the file's size on disk, or -1 (stdin, pipes).
	Size int64
	file io.Closer
	done func()
}

// Options say how to open and read inputs.
type Options struct {
	// Kinds are the kinds the command reads (nil: all). Inputs of other
	// kinds found in a directory are passed over without a word.
	Kinds []Kind
	// Fallback is the kind an unrecognized file named on the command line
	// is parsed as, so that its parser says what is wrong with it
	// (Unknown: refuse it).
	Fallback Kind
	// Command names the command in messages ("ops reads ...").
	Command string
	// Stdin is what "-" reads (nil: os.Stdin).
	Stdin io.Reader
	// Progress may wrap a large file's raw bytes to show progress; done is
	// called when reading ends.
	Progress func(path string, size int64, r io.Reader) (wrapped io.Reader, done func())
	// Warn receives warnings (a skipped file, a truncated input), each
	// naming the file, in input order.
	Warn func(msg string)
	// Parallel is how many inputs are read at once (0: one per CPU).
	Parallel int
	// Select, when set, picks the sources to read among those the
	// arguments expand to (summarize --shard: one task's part); a
	// directory none of whose files is picked is not reported empty.
	Select func([]Source) []Source
	// Reduce, when set, replaces each file as soon as it is read (still
	// inside the bound of Parallel inputs in flight): a command reading
	// many large inputs keeps their summaries, not their records. An
	// error is the input's, as if reading it had failed.
	Reduce func(*File) (*File, error)
	// Done is called after each input is read (or skipped), for progress.
	Done func()
	// Trace configures the trace reader (its Limits are Limits below).
	Trace chrometrace.ReadOptions
	// Limits cap what each input may make its reader read and build
	// (zero fields: the defaults); every reader gets them.
	Limits chrometrace.Limits
}

func (o *Options) wants(k Kind) bool { return o.Kinds == nil || slices.Contains(o.Kinds, k) }

// Open opens path ("-": stdin) once and sniffs its kind from the first
// bytes, which stay in the buffer for the parser.
func Open(path string, o *Options) (*Reader, error) {
	var raw io.Reader
	var closer io.Closer
	size := int64(-1)
	if path == Stdin {
		raw = o.Stdin
		if raw == nil {
			raw = os.Stdin
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, FileError(path, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, FileError(path, err)
		}
		if st.IsDir() {
			f.Close()
			return nil, &Error{Path: path, Err: errors.New("is a directory")}
		}
		if st.Mode().IsRegular() {
			size = st.Size()
		}
		raw, closer = f, f
	}
	var done func()
	if o.Progress != nil && size > 0 {
		raw, done = o.Progress(path, size, raw)
	}
	// A trace read beside others has its share of the CPUs (Load sets
	// Trace.Workers to it): its gzip members inflate on that share.
	in, err := chrometrace.NewInputCPUs(raw, o.Trace.Workers)
	if err != nil {
		if done != nil {
			done()
		}
		if closer != nil {
			closer.Close()
		}
		return nil, FileError(path, err)
	}
	r := &Reader{Input: in, Path: path, Size: size, file: closer, done: done}
	head, err := in.Peek(SniffBytes)
	if len(head) == 0 && err != nil && err != io.EOF {
		r.Close()
		return nil, FileError(path, err)
	}
	r.Kind = Sniff(head)
	return r, nil
}

// Close closes the decompressor and the file.
func (r *Reader) Close() error {
	err := r.Input.Close()
	if r.file != nil {
		if e := r.file.Close(); err == nil {
			err = e
		}
	}
	if r.done != nil {
		r.done()
		r.done = nil
	}
	return err
}

// File is one loaded input; the field of its kind is set.
type File struct {
	Path string
	Kind Kind
	// Rank is the distributed rank (from the trace, else the file or
	// directory name "rank3"), or -1.
	Rank     int64
	Trace    *chrometrace.Trace
	Snapshot *snapshot.Snapshot
	SMI      *smi.Log
	SMIApps  *smi.AppsLog
	Steps    *steplog.Log
	Timeline *exported.Timeline
	Summary  *memsummary.Log
	// Summarized is a torchmem summary: the analyses of a file of the kind
	// it names, read back without that file.
	Summarized *digest.File
	// Warnings are what the parser tolerated (a truncated end), without
	// the file name.
	Warnings []string
}

// Source is one input to read: a file named on the command line, one
// found in a named directory, or stdin.
type Source struct {
	Path string
	// Dir is the directory argument it was found in ("" when named).
	Dir string
	// NotRegular: found in a directory, and not a regular file (a FIFO,
	// socket or device): named in a warning, never opened.
	NotRegular bool
}

// Named says whether the user named this input (it must then be good).
func (s Source) Named() bool { return s.Dir == "" }

// Directory walks stop this deep and after this many files: a directory
// argument is a run's output, not a file system.
const (
	maxDepth = 4
	maxFiles = 10000
)

// Expand turns arguments into sources: a directory stands for the files
// under it (hidden ones and those deeper than a few levels left out),
// sorted by path.
func Expand(args []string) ([]Source, error) {
	var out []Source
	stdin := false
	for _, a := range args {
		if a == Stdin {
			if stdin {
				return nil, errors.New("- (stdin) can be read only once")
			}
			stdin = true
			out = append(out, Source{Path: a})
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, FileError(a, err)
		}
		if !st.IsDir() {
			out = append(out, Source{Path: a})
			continue
		}
		var found, odd []string
		root := filepath.Clean(a)
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == a {
					return err
				}
				found = append(found, p) // reported when opened
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if p == a {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") && d.IsDir() {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				if rel, _ := filepath.Rel(root, p); strings.Count(rel, string(filepath.Separator)) >= maxDepth-1 {
					return fs.SkipDir
				}
				return nil
			}
			if len(found)+len(odd) >= maxFiles {
				return fs.SkipAll
			}
			regular := d.Type().IsRegular()
			if d.Type()&fs.ModeSymlink != 0 {
				st, err := os.Stat(p)
				regular = err != nil || st.Mode().IsRegular() // a broken link is reported when opened
			}
			if !regular {
				// A FIFO would block the read (nothing writes it), a device
				// never ends: in a folder only regular files are read.
				odd = append(odd, p)
				return nil
			}
			found = append(found, p)
			return nil
		})
		if err != nil {
			return nil, FileError(a, err)
		}
		slices.Sort(found)
		for _, p := range found {
			out = append(out, Source{Path: p, Dir: a})
		}
		slices.Sort(odd)
		for _, p := range odd {
			out = append(out, Source{Path: p, Dir: a, NotRegular: true})
		}
	}
	return out, nil
}

// errNotRead is a file found in a directory that is of no kind torchmem
// reads (a config.json): such files are named together, in one warning.
var errNotRead = errors.New("not a file torchmem reads")

// errNotRegular is a FIFO, socket or device found in a directory.
var errNotRegular = errors.New("not a regular file (a FIFO, socket or device: reading it could block or never end)")

// Read opens and parses one source. For a source found in a directory,
// skip reports that it is not of a kind the command reads (its content was
// only peeked at).
func Read(src Source, o *Options) (f *File, skip bool, err error) {
	if src.NotRegular {
		return nil, false, &Error{Path: src.Path, Err: errNotRegular}
	}
	r, err := Open(src.Path, o)
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	kind := r.Kind
	switch {
	case kind == Unknown && src.Named() && o.Fallback != Unknown && o.Fallback != "":
		kind = o.Fallback // let the parser say what is wrong
	case kind == Unknown:
		if !src.Named() {
			return nil, false, &Error{Path: src.Path, Err: errNotRead}
		}
		return nil, false, &Error{Path: src.Path, Err: errors.New("not a file torchmem reads (a Kineto trace, allocator snapshot, nvidia-smi CSV (--query-gpu or --query-compute-apps), per-step JSONL, memory_summary() log, memory timeline or torchmem summary)")}
	case !o.wants(kind):
		if !src.Named() {
			return nil, true, nil
		}
		cmd := "this command"
		if o.Command != "" {
			cmd = o.Command
		}
		if kind == Summarized {
			return nil, false, &Error{Path: src.Path, Err: fmt.Errorf("this is %s; %s needs the file it summarizes (%s)", kind.Describe(), cmd, kindList(o.Kinds))}
		}
		return nil, false, &Error{Path: src.Path, Err: fmt.Errorf("this is %s; %s reads %s", kind.Describe(), cmd, kindList(o.Kinds))}
	}
	f, err = Parse(r, kind, o)
	if err != nil {
		return nil, false, err
	}
	f.Rank = rankOf(f)
	return f, false, nil
}

// Parse reads r as kind, with o's trace options and limits.
func Parse(r *Reader, kind Kind, o *Options) (*File, error) {
	f := &File{Path: r.Path, Kind: kind, Rank: -1}
	var err error
	lim := o.Limits.WithDefaults()
	// Every reader but the trace reader (bounded by its own caps, see
	// chrometrace.Limits) reads through the cap on decompressed bytes.
	in := memtimeline.LimitInput(r.Input, lim.InputBytes)
	switch kind {
	case Trace:
		topts := o.Trace
		topts.Limits = lim
		f.Trace, err = chrometrace.Read(r.Input, topts)
		if err != nil {
			var se *chrometrace.SyntaxError
			if r.Gzipped && errors.As(err, &se) {
				err = fmt.Errorf("%w (after decompression: the gzip data may be corrupt)", err)
			}
		} else {
			f.Warnings = f.Trace.Warnings
		}
	case Snapshot:
		f.Snapshot, err = snapshot.ReadLimited(in, lim)
	case SMI:
		if f.SMI, err = smi.ReadLimited(in, lim); err == nil {
			f.Warnings = f.SMI.Warnings
		}
	case SMIApps:
		if f.SMIApps, err = smi.ReadAppsLimited(in, lim); err == nil {
			f.Warnings = f.SMIApps.Warnings
		}
	case Steps:
		if f.Steps, err = steplog.ReadLimited(in, lim); err == nil {
			f.Warnings = f.Steps.Warnings
		}
	case Summary:
		if f.Summary, err = memsummary.ReadLimited(in, lim); err == nil {
			f.Warnings = f.Summary.Warnings
		}
	case Timeline:
		f.Timeline, err = exported.ReadLimited(in, lim)
	case Summarized:
		f.Summarized, err = digest.Read(in)
	default:
		err = errors.New("not a file torchmem reads")
	}
	if err != nil {
		return nil, FileError(r.Path, err)
	}
	return f, nil
}

func kindList(ks []Kind) string {
	var s []string
	for _, k := range ks {
		s = append(s, k.Describe())
	}
	switch len(s) {
	case 0:
		return "nothing"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func rankOf(f *File) int64 {
	if f.Summarized != nil {
		return f.Summarized.Rank
	}
	if f.Trace != nil && f.Trace.Meta.Distributed != nil {
		return f.Trace.Meta.Distributed.Rank
	}
	if f.Path == Stdin {
		return -1
	}
	return rankname.FromPath(f.Path)
}

// Load expands args and reads every source the command wants, several at
// once. A named file that is bad is an error; a file in a directory that
// is bad or of no known kind is skipped with a warning. It is an error
// when nothing is left to read.
func Load(args []string, o Options) ([]*File, error) {
	srcs, err := Expand(args)
	if err != nil {
		return nil, err
	}
	selected := map[string]bool{} // the directories with sources to read
	if o.Select != nil {
		srcs = o.Select(srcs)
	}
	for _, s := range srcs {
		selected[s.Dir] = true
	}
	type result struct {
		f    *File
		skip bool
		err  error
	}
	res := make([]result, len(srcs))
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	if o.Trace.Workers == 0 && len(srcs) > 1 {
		// Inputs read at once share the CPUs: each trace decodes with
		// its share of them (a trace alone takes them all, up to
		// chrometrace's cap), so a folder of ranks keeps no more batches
		// in flight than a few traces do. Two at least: a run's folder
		// (a trace beside its small logs) reads its trace as fast as a
		// 2-CPU machine reads one trace alone.
		o.Trace.Workers = max(2, runtime.GOMAXPROCS(0)/min(par, len(srcs)))
	}
	var g errgroup.Group // a bad file is a result here, not the group's error
	g.SetLimit(par)
	for i, s := range srcs {
		g.Go(func() error {
			var r result
			if bug := crash.Run(s.Path, func() {
				r.f, r.skip, r.err = Read(s, &o)
				if r.f != nil && o.Reduce != nil {
					if r.f, r.err = o.Reduce(r.f); r.err != nil {
						r.f = nil
					}
				}
			}); bug != nil {
				r = result{err: bug}
			}
			res[i] = r
			if o.Done != nil {
				o.Done()
			}
			return nil
		})
	}
	g.Wait() //nolint:errcheck // every goroutine returns nil
	for _, r := range res {
		var bug *crash.Bug
		if errors.As(r.err, &bug) {
			panic(bug) // to the command's top: a bug, not a bad file
		}
	}
	warn := o.Warn
	if warn == nil {
		warn = func(string) {}
	}
	var out []*File
	perDir := map[string]int{}
	var firstErr error
	var notRead, notRegular []string
	for i, r := range res {
		s := srcs[i]
		switch {
		case r.err != nil && s.Named():
			if firstErr == nil {
				firstErr = r.err
			}
		case r.err != nil && errors.Is(r.err, errNotRead):
			notRead = append(notRead, s.Path)
		case r.err != nil && errors.Is(r.err, errNotRegular):
			notRegular = append(notRegular, s.Path)
		case r.err != nil:
			warn("skipping " + r.err.Error())
		case r.skip:
		default:
			for _, w := range r.f.Warnings {
				warn(r.f.Path + ": " + w)
			}
			out = append(out, r.f)
			perDir[s.Dir]++
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if len(notRead) > 0 {
		warn(skippedLine(notRead, "torchmem does not read"))
	}
	if len(notRegular) > 0 {
		warn(skippedLine(notRegular, "not regular (FIFOs, sockets or devices: reading one could block or never end)"))
	}
	want := "nothing torchmem reads"
	if len(o.Kinds) > 0 {
		var names []string
		for _, k := range o.Kinds {
			d := k.Describe()
			names = append(names, strings.TrimPrefix(strings.TrimPrefix(d, "a "), "an "))
		}
		want = "no " + strings.Join(slices.Compact(names), " or ")
	}
	for _, a := range args {
		if o.Select != nil && !selected[a] {
			continue // the selection left none of its files
		}
		if st, err := os.Stat(a); err == nil && st.IsDir() && perDir[a] == 0 {
			if len(out) == 0 {
				return nil, &Error{Path: a, Err: errors.New(want + " in this directory")}
			}
			warn(a + ": " + want + " in this directory")
		}
	}
	if len(out) == 0 {
		return nil, errors.New(want + " in the inputs")
	}
	for _, f := range out {
		// From here on the path is a name to print: on one line, so that
		// a file named "x\n[PASS] ..." cannot start a line of output.
		f.Path = chrometrace.OneLine(f.Path)
	}
	return out, nil
}

// skippedLine names the files passed over, in one line (at most 8 named).
func skippedLine(paths []string, why string) string {
	const named = 8
	what := "file"
	if len(paths) > 1 {
		what = "files"
	}
	list := more.Join(paths, named, ", ")
	return fmt.Sprintf("skipping %d %s %s: %s", len(paths), what, why, chrometrace.OneLine(list))
}
