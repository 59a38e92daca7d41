package chrometrace

import (
	"strconv"
	"strings"
)

// Frame is a python_function name split into its parts:
// "path/file.py(123): func" -> File "path/file.py", Line 123, Function "func".
// Module frames ("nn.Module: Linear_0") and built-ins have no file.
type Frame struct {
	File     string
	Line     int
	Function string
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
	return Frame{File: name[:open], Line: line, Function: name[closeParen+3:]}, true
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
		return IsLibraryFile(f.File)
	}
	return IsLibraryFile(name)
}

// libraryRoots are packages whose frames are never the user's code; trace
// frames name them relative ("torch/nn/modules/module.py").
var libraryRoots = []string{"torch/", "torchvision/", "transformers/", "triton/", "numpy/", "accelerate/"}

// IsLibraryFile reports whether a source file is library code: relative
// paths as profiler traces write them, absolute ones as allocator
// snapshots do.
func IsLibraryFile(path string) bool {
	switch {
	case strings.HasPrefix(path, "<"):
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
