// Package python holds the build of the torchmem wheel (build.sh, setup.py,
// pyproject.toml; see README.md) and, in this file, its test: it builds the
// wheels for every platform, checks each wheel's tags against the binary it
// carries, installs this machine's wheel into a fresh virtualenv without an
// index, and runs the program and imports the snippet from there.
package python

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// targets are the platforms build.sh builds by default: all of them are
// built once and checked here.
var targets = []string{"linux/amd64", "linux/arm64", "darwin/arm64", "darwin/amd64"}

const repoRoot = "../../.."

func TestWheels(t *testing.T) {
	py := buildPython(t)
	trackBuildInputs(t)
	version := readVersion(t)
	out := t.TempDir()

	args := append([]string{"build.sh", "-o", out}, targets...)
	build := exec.CommandContext(t.Context(), "bash", args...)
	build.Env = append(os.Environ(), "PYTHON="+py, "GO="+goWrapper(t))
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	paths, err := filepath.Glob(filepath.Join(out, "*.whl"))
	if err != nil {
		t.Fatal(err)
	}

	// Every wheel's tags and contents; each target exactly once.
	byTarget := map[string]string{}
	for _, p := range paths {
		w := checkWheel(t, p, version)
		if w.target == "" {
			continue
		}
		if prev, dup := byTarget[w.target]; dup {
			t.Errorf("two wheels for %s: %s and %s", w.target, filepath.Base(prev), filepath.Base(p))
		}
		byTarget[w.target] = p
	}
	for _, tg := range targets {
		if byTarget[tg] == "" {
			t.Errorf("no wheel carries a %s binary (built: %v)", tg, paths)
		}
	}
	if t.Failed() {
		return
	}

	host := runtime.GOOS + "/" + runtime.GOARCH
	whl := byTarget[host]
	if whl == "" {
		t.Skipf("no wheel for this machine (%s): the install check needs one of %v", host, targets)
	}
	checkInstall(t, py, whl, version)
}

// goWrapper writes the go command build.sh runs here (its GO): for this
// machine's platform the go command itself, so that the wheel installed and
// run below carries the real program; for the other platforms it compiles
// the real program for the platform (every package, not linked: it builds
// there) and links testdata/otherplatform instead, with build.sh's own
// command line. Linking torchmem three more times cost three quarters of
// this test's CPU; what the other wheels are checked for (their tags
// against the ELF or Mach-O binary inside: architecture, static, the macOS
// version the linker stamps) is the linker's and build.sh's, the same for
// any program built that way.
func goWrapper(t *testing.T) string {
	gocmd, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		t.Fatal(err)
	}
	script := `#!/usr/bin/env bash
set -euo pipefail
go=` + shellQuote(gocmd) + `
if [[ "${GOOS:-}/${GOARCH:-}" == ` + shellQuote(runtime.GOOS+"/"+runtime.GOARCH) + ` || "$1" != build ]]; then
  exec "$go" "$@"
fi
if [[ "${!#}" != ./cmd/torchmem ]]; then
  echo "TestWheels' go wrapper: build.sh built ${!#}, not ./cmd/torchmem" >&2
  exit 1
fi
"$go" list -export -deps -trimpath ./cmd/torchmem >/dev/null
exec "$go" "${@:1:$#-1}" ./cmd/torchmem/python/testdata/otherplatform
`
	// Opened, so that go test's result cache (trackBuildInputs skips testdata) sees it.
	if _, err := os.ReadFile(filepath.Join("testdata", "otherplatform", "main.go")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// trackBuildInputs opens every file the build may read (all but testdata
// and hidden directories), so that go test's result cache, which sees only
// what this process opens and not what build.sh's go build compiles, reruns
// the test when any of them changes.
func trackBuildInputs(t *testing.T) {
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != repoRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "dist" || name == "__pycache__") {
				return filepath.SkipDir
			}
			return nil
		}
		// Sources, embedded files (templates, scripts), the package's files.
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// buildPython is the interpreter that builds and installs the wheels:
// $PYTHON, else Debian's /usr/bin/python3 (the one apt installs the
// packaging tools for). Without the tools the test skips on a developer's
// machine and fails under CI, where .ci/run installs them.
func buildPython(t *testing.T) string {
	py := os.Getenv("PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if b, err := exec.Command(py, "-c", "import build, setuptools, wheel, venv, pip").CombinedOutput(); err != nil {
		missingTools(t, fmt.Sprintf("%s cannot import build, setuptools, wheel, venv and pip (%v: %s)", py, err, bytes.TrimSpace(b)))
	}
	return py
}

func missingTools(t *testing.T, why string) {
	t.Helper()
	msg := why + "; install them with: apt-get install python3-build python3-setuptools python3-wheel python3-venv python3-pip"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (.ci/run does; under CI this test fails rather than skip)")
	}
	t.Skip(msg)
}

func readVersion(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(repoRoot, "cmd", "torchmem", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

type wheelInfo struct {
	target string // GOOS/GOARCH of the binary inside
}

var (
	linuxPlat = regexp.MustCompile(`^(manylinux_\d+_\d+|manylinux2014|musllinux_\d+_\d+)_(x86_64|aarch64)$`)
	macPlat   = regexp.MustCompile(`^macosx_(\d+)_(\d+)_(x86_64|arm64)$`)
)

// checkWheel checks one wheel against the wheel spec (PEP 427/491) and
// against what it carries: the platform tags must fit the binary (its
// architecture; static for manylinux/musllinux; the macOS version it was
// linked for), the version must be VERSION's, the snippet must be
// examples/torchmem_profile.py byte for byte.
func checkWheel(t *testing.T, path, version string) wheelInfo {
	t.Helper()
	base := filepath.Base(path)
	parts := strings.Split(strings.TrimSuffix(base, ".whl"), "-")
	if len(parts) != 5 || parts[0] != "torchmem" || parts[1] != version || parts[2] != "py3" || parts[3] != "none" {
		t.Errorf("%s: want torchmem-%s-py3-none-<platform>.whl", base, version)
		return wheelInfo{}
	}
	plats := strings.Split(parts[4], ".")

	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	defer zr.Close()
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		files[f.Name] = f
	}
	read := func(name string) []byte {
		f := files[name]
		if f == nil {
			t.Errorf("%s: no %s", base, name)
			return nil
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatalf("%s: %s: %v", base, name, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("%s: %s: %v", base, name, err)
		}
		return b
	}
	distInfo := "torchmem-" + version + ".dist-info/"

	// WHEEL: not purelib, and one Tag line per tag of the file name's set.
	fields := headerFields(read(distInfo + "WHEEL"))
	if got := fields["Root-Is-Purelib"]; !slices.Equal(got, []string{"false"}) {
		t.Errorf("%s: Root-Is-Purelib %v, want false (the wheel carries a program)", base, got)
	}
	var wantTags []string
	for _, p := range plats {
		wantTags = append(wantTags, "py3-none-"+p)
	}
	gotTags := slices.Clone(fields["Tag"])
	slices.Sort(gotTags)
	slices.Sort(wantTags)
	if !slices.Equal(gotTags, wantTags) {
		t.Errorf("%s: WHEEL tags %v, the file name says %v", base, gotTags, wantTags)
	}
	meta := headerFields(read(distInfo + "METADATA"))
	if !slices.Equal(meta["Name"], []string{"torchmem"}) || !slices.Equal(meta["Version"], []string{version}) {
		t.Errorf("%s: METADATA Name %v Version %v, want torchmem %s", base, meta["Name"], meta["Version"], version)
	}

	// The license: said in METADATA (License, or License-Expression from
	// setuptools with PEP 639) and its text carried in .dist-info
	// (licenses/LICENSE under PEP 639), byte for byte the repository's.
	if lic := append(meta["License"], meta["License-Expression"]...); !slices.Contains(lic, "Apache-2.0") {
		t.Errorf("%s: METADATA License %q License-Expression %q, want Apache-2.0", base, meta["License"], meta["License-Expression"])
	}
	license, err := os.ReadFile(filepath.Join(repoRoot, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	licName := distInfo + "LICENSE"
	if files[licName] == nil {
		licName = distInfo + "licenses/LICENSE"
	}
	if got := read(licName); !bytes.Equal(got, license) || !bytes.Contains(got, []byte("Apache License")) {
		t.Errorf("%s: %s is not the repository's LICENSE (%d bytes, want %d)", base, licName, len(got), len(license))
	}

	// RECORD: every file, with its hash.
	record := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(read(distInfo+"RECORD"))), "\n") {
		if f := strings.Split(line, ","); len(f) == 3 {
			record[f[0]] = f[1]
		}
	}
	for name := range files {
		if name == distInfo+"RECORD" || strings.HasSuffix(name, "/") {
			continue
		}
		sum := sha256.Sum256(read(name))
		if want := "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]); record[name] != want {
			t.Errorf("%s: RECORD has %q for %s, the file hashes to %s", base, record[name], name, want)
		}
	}

	// The Python side: the snippet from its single source, the package, the version.
	snippet, err := os.ReadFile(filepath.Join(repoRoot, "examples", "torchmem_profile.py"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read("torchmem_profile.py"), snippet) {
		t.Errorf("%s: torchmem_profile.py differs from examples/torchmem_profile.py", base)
	}
	for _, name := range []string{"__init__.py", "__main__.py", "example.py"} {
		src, err := os.ReadFile(filepath.Join("torchmem", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(read("torchmem/"+name), src) {
			t.Errorf("%s: torchmem/%s differs from cmd/torchmem/python/torchmem/%s", base, name, name)
		}
	}
	// The example trace, from its one source.
	trace, err := os.ReadFile(filepath.Join(repoRoot, "examples", "traces", "leak_module_cache.trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read("torchmem/examples/leak_module_cache.trace.json.gz"), trace) {
		t.Errorf("%s: torchmem/examples/leak_module_cache.trace.json.gz differs from examples/traces/", base)
	}
	if got, want := string(read("torchmem/_version.py")), fmt.Sprintf("__version__ = %q\n", version); got != want {
		t.Errorf("%s: torchmem/_version.py is %q, want %q", base, got, want)
	}

	// The binary: a script (installed into bin/, on PATH), executable.
	binName := "torchmem-" + version + ".data/scripts/torchmem"
	if f := files[binName]; f == nil {
		t.Errorf("%s: no %s", base, binName)
		return wheelInfo{}
	} else if f.Mode()&0o111 == 0 {
		t.Errorf("%s: %s is not executable in the archive (mode %v)", base, binName, f.Mode())
	}
	target, err := checkBinaryFitsTags(read(binName), plats)
	if err != nil {
		t.Errorf("%s: %v", base, err)
		return wheelInfo{}
	}
	return wheelInfo{target: target}
}

// checkBinaryFitsTags says which GOOS/GOARCH the program is built for and
// whether every platform tag fits it.
func checkBinaryFitsTags(bin []byte, plats []string) (string, error) {
	if f, err := elf.NewFile(bytes.NewReader(bin)); err == nil {
		arch := map[elf.Machine][2]string{elf.EM_X86_64: {"amd64", "x86_64"}, elf.EM_AARCH64: {"arm64", "aarch64"}}[f.Machine]
		if arch[0] == "" {
			return "", fmt.Errorf("ELF binary for %v, not a built target", f.Machine)
		}
		// manylinux and musllinux promise it runs with any glibc or musl: true
		// of a static program only.
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				return "", fmt.Errorf("the binary is dynamically linked (%v), the tags %v promise any libc", p.Type, plats)
			}
		}
		for _, p := range plats {
			m := linuxPlat.FindStringSubmatch(p)
			if m == nil || m[2] != arch[1] {
				return "", fmt.Errorf("tag %s does not fit a static linux %s binary", p, arch[1])
			}
		}
		return "linux/" + arch[0], nil
	}
	f, err := macho.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", errors.New("the binary is neither ELF nor Mach-O")
	}
	arch := map[macho.Cpu][2]string{macho.CpuAmd64: {"amd64", "x86_64"}, macho.CpuArm64: {"arm64", "arm64"}}[f.Cpu]
	if arch[0] == "" {
		return "", fmt.Errorf("Mach-O binary for %v, not a built target", f.Cpu)
	}
	// LC_BUILD_VERSION's minos: the oldest macOS the program runs on, which
	// is what the macosx_X_Y tag must say (older: pip installs it where it
	// cannot run; newer: pip refuses machines it would run on).
	const lcBuildVersion = 0x32
	var minos uint32
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) >= 16 && f.ByteOrder.Uint32(raw) == lcBuildVersion {
			minos = f.ByteOrder.Uint32(raw[12:])
		}
	}
	if minos == 0 {
		return "", errors.New("the Mach-O binary has no LC_BUILD_VERSION")
	}
	want := fmt.Sprintf("macosx_%d_%d_%s", minos>>16, minos>>8&0xff, arch[1])
	for _, p := range plats {
		if macPlat.FindStringSubmatch(p) == nil || p != want {
			return "", fmt.Errorf("tag %s does not fit the binary (linked for macOS %d.%d, %s: %s)", p, minos>>16, minos>>8&0xff, arch[1], want)
		}
	}
	return "darwin/" + arch[0], nil
}

// headerFields parses the RFC 822 style header of WHEEL and METADATA.
func headerFields(b []byte) map[string][]string {
	fields := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // the body (METADATA's description) follows
		}
		if k, v, ok := strings.Cut(line, ": "); ok {
			fields[k] = append(fields[k], v)
		}
	}
	return fields
}

// checkInstall installs the wheel into a fresh virtualenv with pip, offline,
// and uses it as a user would: the program on the venv's PATH, `python -m
// torchmem`, and both imports of the snippet.
func checkInstall(t *testing.T, py, whl, version string) {
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	// Without pip of its own (seeding one costs seconds of CPU per run):
	// the building interpreter's pip installs into the venv (pip --python).
	if b, err := exec.CommandContext(t.Context(), py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		missingTools(t, fmt.Sprintf("%s -m venv failed (%v: %s)", py, err, bytes.TrimSpace(b)))
	}
	bin := filepath.Join(venv, "bin")
	// What the venv's programs see: nothing of this machine's Python setup.
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + "/usr/bin:/bin", "HOME=" + dir, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_CACHE_DIR=1"}
	runIn := func(name string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), filepath.Join(bin, name), args...)
		cmd.Env = append(env, "COLUMNS=400") // content, not layout: no line wraps
		cmd.Dir = dir                        // not the repository: imports must come from the venv
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}

	install := exec.CommandContext(t.Context(), py, "-m", "pip", "--python", filepath.Join(bin, "python"), "install", "--no-index", whl)
	install.Env, install.Dir = env, dir
	if b, err := install.CombinedOutput(); err != nil {
		if bytes.Contains(b, []byte("no such option: --python")) {
			missingTools(t, fmt.Sprintf("%s's pip is older than 22.3 (no --python)", py))
		}
		t.Fatalf("pip --python %s install --no-index %s: %v\n%s", venv, filepath.Base(whl), err, b)
	}

	for _, args := range [][]string{{"torchmem", "--version"}, {"python", "-m", "torchmem", "--version"}} {
		out, errOut, code := runIn(args[0], args[1:]...)
		if f := strings.Fields(out); code != 0 || len(f) == 0 || f[len(f)-1] != version {
			t.Errorf("%v: exit %d, %q %q; want version %s", args, code, out, errOut, version)
		}
	}

	// The example trace the wheel carries (README: torchmem analyze
	// "$(python -m torchmem.example)") leaks: analyze says so and exits 1.
	// It prints the path and nothing else: no RuntimeWarning that the
	// module was imported before it ran (the package once imported it).
	out, errOut, code := runIn("python", "-m", "torchmem.example")
	trace := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(trace, dir) || !strings.HasSuffix(trace, "leak_module_cache.trace.json.gz") || errOut != "" {
		t.Fatalf("python -m torchmem.example: exit %d, %q %q; want the bundled trace inside the venv and an empty stderr", code, out, errOut)
	}
	if out, errOut, code := runIn("python", "-c", "import torchmem; print(torchmem.example_trace())"); code != 0 || strings.TrimSpace(out) != trace || errOut != "" {
		t.Errorf("torchmem.example_trace(): exit %d, %q %q; want %s", code, out, errOut, trace)
	}
	out, errOut, code = runIn("torchmem", "analyze", trace)
	if code != 1 || !strings.Contains(out, "leak_module_cache.trace.json.gz") || !strings.Contains(strings.ToLower(out), "leak") {
		t.Errorf("torchmem analyze %s from the venv: exit %d (want 1: it leaks)\nstdout:\n%s\nstderr:\n%s", trace, code, out, errOut)
	}

	// Without torch (the venv has none) the snippet's names fail with one
	// error that says torch is needed: no chained traceback before it.
	for _, imp := range []string{"from torchmem import TorchMemProfile", "import torchmem_profile"} {
		out, errOut, code := runIn("python", "-c", imp)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		last := lines[len(lines)-1]
		if code != 1 || out != "" || !strings.HasPrefix(last, "ModuleNotFoundError: ") || !strings.Contains(last, "needs torch") ||
			strings.Contains(errOut, "During handling") || strings.Contains(errOut, "direct cause") || strings.Count(errOut, "Traceback") != 1 || len(lines) > 6 {
			t.Errorf("python -c %q without torch: exit %d, %d lines of stderr, want one ModuleNotFoundError saying torch is needed, unchained:\n%s", imp, code, len(lines), errOut)
		}
	}

	out, errOut, code = runIn("python", "-c", importCheck, version)
	if code != 0 || strings.TrimSpace(out) != "ok" {
		t.Errorf("importing the snippet from the venv: exit %d\n%s%s", code, out, errOut)
	}
}

// importCheck runs in the venv's python (argv[1] is the version). Without
// torch, `import torchmem` works and the snippet fails only for want of
// torch. Then with a stand-in torch (the venv has none) both imports give the
// same objects for every name the snippet exports; a name that needs a
// framework (transformers, lightning) fails alike through both until the
// framework is stood in for too. If the snippet comes to need more of torch
// while it is imported, teach the stand-in here.
const importCheck = `
import importlib.abc, importlib.machinery, os, sys, sysconfig

site = os.path.realpath(sysconfig.get_paths()["purelib"])
def installed(mod):
    assert os.path.realpath(mod.__file__).startswith(site + os.sep), (mod.__file__, site)

import torchmem
installed(torchmem)
assert torchmem.__version__ == sys.argv[1], torchmem.__version__
assert "torch" not in sys.modules, "import torchmem imported torch"
assert os.path.basename(torchmem.find_torchmem_bin()) == "torchmem"

try:
    import torchmem_profile
except ModuleNotFoundError as e:
    assert e.name == "torch", repr(e)
    assert "needs torch" in str(e), str(e)  # says what to install, not a bare "No module named"
else:
    raise AssertionError("torchmem_profile imported without torch")

class Stub:
    def __init__(self, *args, **kwargs): pass
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub()
    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return Stub()
    def __mro_entries__(self, bases): return (object,)
    def __iter__(self): return iter(())
    def __bool__(self): return False
    def __enter__(self): return self
    def __exit__(self, *exc): return False

class StubModule(type(sys)):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub()

stood_in = {"torch"}

class StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in stood_in:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        m = StubModule(spec.name)
        m.__path__ = []
        m.__version__ = "2.11.0"
        return m
    def exec_module(self, module): pass

sys.meta_path.insert(0, StandIn())

from torchmem_profile import TorchMemProfile
from torchmem import TorchMemProfile as Again
import torchmem_profile
installed(torchmem_profile)
assert Again is TorchMemProfile

def resolve(mod, name):
    try:
        return getattr(mod, name), None
    except ModuleNotFoundError as e:
        return None, e.name

names = getattr(torchmem_profile, "__all__", ["TorchMemProfile"])
for name in names:
    value, missing = resolve(torchmem_profile, name)
    again, missing_again = resolve(torchmem, name)
    assert (value, missing) == (again, missing_again), (name, value, missing, again, missing_again)
    if missing:
        assert missing.split(".")[0] != "torch", (name, missing)
        stood_in.add(missing.split(".")[0])
for name in names:
    assert getattr(torchmem, name) is getattr(torchmem_profile, name), name
print("ok")
`
