package chrometrace

import (
	"strconv"
	"strings"
)

// Frame is one stack frame: the one frame type of torchmem. Traces name
// Python frames "path/file.py(123): func" (ParseFrame splits them);
// allocator snapshots record them as {filename, line, name}, C++ frames
// included. Module frames ("nn.Module: Linear_0") and built-ins have no
// file.
type Frame struct {
	Filename string `json:"filename"`
	Line     int    `json:"line"`
	Name     string `json:"name"`
}

// IsPython reports whether the frame is Python code (not a C++ frame from
// the unwinder, whose file is "??", "" or a .cpp/.h).
func (f Frame) IsPython() bool { return strings.HasSuffix(f.Filename, ".py") }

// String names the frame the one way every output does: Python frames as
// the profiler writes them, "path/file.py(123): func", with library paths
// shortened (ShortPath); C++ frames by their name.
func (f Frame) String() string {
	if f.IsPython() || f.Line > 0 {
		return FrameName(ShortPath(f.Filename), f.Line, f.Name)
	}
	if f.Filename == "" || f.Filename == "??" {
		return f.Name
	}
	return f.Filename + " " + f.Name
}

// FrameName writes a frame as python_function events name it.
func FrameName(file string, line int, function string) string {
	return file + "(" + strconv.Itoa(line) + "): " + function
}

// ParseFrame splits a python_function name; ok is false for names that are
// not "file(line): function".
func ParseFrame(name string) (Frame, bool) {
	open := strings.IndexByte(name, '(')
	closeParen := strings.Index(name, "): ")
	if open <= 0 || closeParen < open || strings.HasPrefix(name, "<built-in") {
		return Frame{}, false
	}
	line, err := strconv.Atoi(name[open+1 : closeParen])
	if err != nil {
		return Frame{}, false
	}
	return Frame{Filename: name[:open], Line: line, Name: name[closeParen+3:]}, true
}

// ShortPath shortens a library file's absolute path to the part Python
// imports it by, as profiler traces write it:
// "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py" ->
// "torch/nn/modules/module.py", ".../lib/python3.12/threading.py" ->
// "threading.py". The user's own paths are kept as recorded.
func ShortPath(path string) string {
	for _, marker := range []string{"/site-packages/", "/dist-packages/"} {
		if i := strings.LastIndex(path, marker); i >= 0 {
			return path[i+len(marker):]
		}
	}
	if i := strings.Index(path, "/lib/python3"); i >= 0 {
		rest := path[i+len("/lib/python3"):]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			return rest[j+1:]
		}
	}
	if i := strings.LastIndex(path, "/torch/"); i >= 0 && IsLibraryFile(path) {
		return path[i+1:]
	}
	return path
}

// UserChain is the user's view of a call chain (outermost first): the
// frames of the user's own code, library plumbing between them collapsed
// away, and when the innermost frame is library code, that frame,
// shortened ("torch/nn/modules/linear.py(134): forward"): the library
// function the user's line led to. Library frames above the user's
// outermost frame (the interpreter, runpy, threading) are dropped. A chain
// of library frames only is kept whole, shortened: something must name
// the site.
func UserChain(frames []string) []string {
	out := make([]string, 0, len(frames))
	for _, f := range frames {
		if !IsLibraryFrame(f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		for _, f := range frames {
			out = append(out, shortFrame(f))
		}
		return out
	}
	if n := len(frames); n > 0 && IsLibraryFrame(frames[n-1]) && !strings.HasPrefix(frames[n-1], "<") {
		out = append(out, shortFrame(frames[n-1]))
	}
	return out
}

func shortFrame(name string) string {
	if f, ok := ParseFrame(name); ok {
		return FrameName(ShortPath(f.Filename), f.Line, f.Name)
	}
	return name
}

// hookRegistrations are torch.nn.Module's methods that register a hook on
// a module (torch/nn/modules/module.py): called again every step, they pile
// up hooks that each run (and may keep memory) every call.
var hookRegistrations = map[string]bool{
	"register_forward_hook":           true,
	"register_forward_pre_hook":       true,
	"register_full_backward_hook":     true,
	"register_backward_hook":          true,
	"register_full_backward_pre_hook": true,
}

// HookRegistration returns the method's name when a frame is torch's own
// registration of a module hook ("torch/nn/modules/module.py(1688):
// register_forward_hook"), "" otherwise. The registration shows in a trace
// whether or not the hook itself does (a lambda or a builtin runs without a
// Python frame of its own).
func HookRegistration(name string) string {
	f, ok := ParseFrame(name)
	if !ok || !hookRegistrations[f.Name] || !strings.HasSuffix(f.Filename, "torch/nn/modules/module.py") {
		return ""
	}
	return f.Name
}

// NormalizeFrame drops object addresses from built-in frames
// ("<built-in method append of list object at 0x7f09...>"), which would
// otherwise make every call a site of its own.
func NormalizeFrame(name string) string {
	if i := strings.Index(name, " at 0x"); i >= 0 && strings.HasPrefix(name, "<built-in") {
		return name[:i] + ">"
	}
	return name
}

// stdlibModules are standard-library files that show up in training
// stacks; Python records them by bare file name.
var stdlibModules = map[string]bool{
	"typing.py": true, "contextlib.py": true, "threading.py": true, "functools.py": true,
	"abc.py": true, "enum.py": true, "weakref.py": true, "copy.py": true, "inspect.py": true,
	"collections/__init__.py": true, "dataclasses.py": true, "queue.py": true, "selectors.py": true,
	"multiprocessing/connection.py": true, "multiprocessing/queues.py": true, "socket.py": true,
	"tempfile.py": true, "warnings.py": true, "traceback.py": true, "linecache.py": true,
	"runpy.py": true, "logging/__init__.py": true, "re/__init__.py": true, "json/__init__.py": true,
}

// IsLibraryFrame reports whether a frame belongs to torch, an installed
// package, the standard library or the interpreter rather than to the
// user's own code. Module frames ("nn.Module: Cached_0") count as the
// user's: they name the layer.
func IsLibraryFrame(name string) bool {
	switch {
	case strings.HasPrefix(name, "nn.Module:"):
		return false
	case strings.HasPrefix(name, "<built-in"), strings.HasPrefix(name, "<frozen"), strings.HasPrefix(name, "<string>"):
		return true
	}
	if f, ok := ParseFrame(name); ok {
		return IsLibraryFile(f.Filename)
	}
	return IsLibraryFile(name)
}

// libraryRoots are packages whose frames are never the user's code; trace
// frames name them relative ("torch/nn/modules/module.py").
var libraryRoots = []string{"torch/", "torchvision/", "torchaudio/", "torchtext/", "transformers/", "triton/", "numpy/",
	"accelerate/", "lightning/", "pytorch_lightning/", "lightning_fabric/", "deepspeed/", "peft/", "trl/", "timm/",
	"datasets/", "huggingface_hub/", "safetensors/", "tokenizers/", "diffusers/", "apex/", "xformers/", "flash_attn/",
	"einops/", "torchmetrics/", "fairscale/", "megatron/", "vllm/", "sklearn/", "scipy/", "pandas/", "tqdm/", "wandb/"}

// generatedMarks name code torch.compile generates at run time: inductor's
// output code cache (/tmp/torchinductor_<user>/xx/cxx....py, or wherever
// TORCHINDUCTOR_CACHE_DIR points: the files are named by their hash), the
// Triton kernels it compiles, FX's and dynamo's generated functions. Such
// a frame is context, never the user's line.
var generatedMarks = []string{"torchinductor_", "/inductor_cache/", "/.triton/", "/triton_cache/", "<eval_with_key>", "__compiled_fn", "torch/_dynamo/", "torch/_inductor/", "torch/fx/"}

// IsGeneratedFile reports whether a file is code torch.compile generated
// (see generatedMarks).
func IsGeneratedFile(path string) bool {
	for _, m := range generatedMarks {
		if strings.Contains(path, m) {
			return true
		}
	}
	return false
}

// IsGeneratedFrame reports whether a frame ("file.py(12): call", or a
// bare path) runs code torch.compile generated.
func IsGeneratedFrame(name string) bool {
	if f, ok := ParseFrame(name); ok {
		return IsGeneratedFile(f.Filename)
	}
	return IsGeneratedFile(name)
}

// IsLibraryFile reports whether a source file is library code: relative
// paths as profiler traces write them, absolute ones as allocator
// snapshots do.
func IsLibraryFile(path string) bool {
	switch {
	case strings.HasPrefix(path, "<"), IsGeneratedFile(path):
		return true
	case strings.Contains(path, "/site-packages/"), strings.Contains(path, "/dist-packages/"), strings.Contains(path, "/lib/python3"):
		return true
	case stdlibModules[path]:
		return true
	}
	for _, root := range libraryRoots {
		if strings.HasPrefix(path, root) {
			return true
		}
	}
	// A source checkout of torch: ".../torch/<one of its packages>/..."
	// is torch's, ".../torch/myproject/train.py" stays the user's.
	if i := strings.LastIndex(path, "/torch/"); i >= 0 {
		rest := path[i+len("/torch/"):]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			rest = rest[:j]
		}
		return torchPackages[rest]
	}
	return false
}

// torchPackages are the top-level parts of the torch package.
var torchPackages = map[string]bool{
	"nn": true, "autograd": true, "optim": true, "utils": true, "cuda": true,
	"_dynamo": true, "_inductor": true, "_functorch": true, "distributed": true,
	"amp": true, "fx": true, "jit": true, "profiler": true, "_subclasses": true,
	"_export": true, "export": true, "backends": true, "multiprocessing": true,
	"sparse": true, "testing": true, "_library": true, "_higher_order_ops": true,
	"_prims": true, "_refs": true, "_decomp": true, "_prims_common": true,
	"_tensor.py": true, "functional.py": true, "_ops.py": true, "overrides.py": true,
	"_jit_internal.py": true, "random.py": true, "serialization.py": true,
}

// NoPythonStack names a site whose allocation has no Python stack (the
// trace was recorded without with_stack, or the allocation came from C++
// alone): every table and chart says it this one way.
const NoPythonStack = "(no Python stack)"

// InnermostFrame is a stack's innermost frame (stacks are outermost
// first), or NoPythonStack for an empty one.
func InnermostFrame(stack []string) string {
	if len(stack) == 0 {
		return NoPythonStack
	}
	return stack[len(stack)-1]
}
