#!/usr/bin/env bash
# Builds the torchmem wheels: the Go binary, cross-compiled, plus the profiling
# snippet as an importable module, one platform wheel per target.
#
#   cmd/torchmem/python/build.sh [-o OUTDIR] [GOOS/GOARCH ...]
#
# Targets default to all four: linux/amd64 linux/arm64 darwin/arm64 darwin/amd64.
# Wheels land in OUTDIR (default dist/ at the repository root, ignored by git).
#
# Offline, with Debian's packaging tools only:
#   apt-get install python3-build python3-setuptools python3-wheel
# PYTHON picks the interpreter that builds (default /usr/bin/python3, Debian's,
# where apt puts those tools; a pyenv or conda python3 earlier on PATH usually
# lacks them). GO picks the Go command (default: go on PATH, else
# /usr/local/go/bin/go).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$root/dist"
if [[ "${1:-}" == "-o" ]]; then
  [[ $# -ge 2 ]] || { echo "build.sh: -o needs a directory" >&2; exit 2; }
  out="$2"
  shift 2
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(linux/amd64 linux/arm64 darwin/arm64 darwin/amd64)

PYTHON="${PYTHON:-/usr/bin/python3}"
if [[ -z "${GO:-}" ]]; then
  GO="$(command -v go || echo /usr/local/go/bin/go)"
fi
# pyproject.toml's build-system requires, checked here once: each wheel's
# build then skips the check (-x), which costs a Python process per wheel.
if ! "$PYTHON" -c 'import build, setuptools, wheel; assert int(setuptools.__version__.split(".")[0]) >= 61' 2>/dev/null; then
  echo "build.sh: $PYTHON cannot import build, setuptools (61 or later) and wheel;" \
    "install them with: apt-get install python3-build python3-setuptools python3-wheel" \
    "(or set PYTHON to an interpreter that has them)" >&2
  exit 3
fi

# Wheel platform tags. The binary is static (CGO_ENABLED=0: no libc, no
# interpreter), so one Linux wheel serves glibc and musl systems alike:
# manylinux_2_17 (with its legacy alias manylinux2014, for pip < 20.3) and
# musllinux_1_1. macOS: Go 1.26's linker stamps its Mach-O binaries with
# LC_BUILD_VERSION minos 12.0 (cmd/link/internal/ld/macho.go; Go 1.25 and
# later need macOS 12 Monterey), so the wheels say macosx_12_0. The Go test
# beside this file checks every tag against the binary inside the wheel.
platform_tag() {
  case "$1" in
    linux/amd64) echo manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64 ;;
    linux/arm64) echo manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64 ;;
    darwin/arm64) echo macosx_12_0_arm64 ;;
    darwin/amd64) echo macosx_12_0_x86_64 ;;
    *) return 1 ;;
  esac
}

version="$(tr -d '[:space:]' < "$root/cmd/torchmem/VERSION")"
# Reproducible zip timestamps: the commit's time unless the caller set one.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}"

mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for target in "${targets[@]}"; do
  platform_tag "$target" >/dev/null || {
    echo "build.sh: unknown target $target (want linux/amd64, linux/arm64, darwin/arm64 or darwin/amd64)" >&2
    exit 2
  }
done

# build_one TARGET: the binary, the staged package, the wheel. Its output
# goes to a log, shown when it fails.
build_one() {
  local target="$1" tag stage
  tag="$(platform_tag "$target")"
  stage="$work/${target/\//-}"
  mkdir -p "$stage/bin"
  (cd "$root" && CGO_ENABLED=0 GOOS="${target%/*}" GOARCH="${target#*/}" \
    "$GO" build -trimpath -ldflags="-s -w" -o "$stage/bin/torchmem" ./cmd/torchmem)
  # The package's files, and the snippet copied from its single source.
  cp "$here/pyproject.toml" "$here/setup.py" "$here/description.md" "$root/LICENSE" "$stage/"
  cp -R "$here/torchmem" "$stage/torchmem"
  rm -rf "$stage/torchmem/__pycache__"
  cp "$root/examples/torchmem_profile.py" "$stage/torchmem_profile.py"
  # One small real trace, so that a pip user can run the README's example without a clone.
  mkdir -p "$stage/torchmem/examples"
  cp "$root/examples/traces/leak_module_cache.trace.json.gz" "$stage/torchmem/examples/"
  printf '%s\n' "$version" > "$stage/VERSION"
  printf '%s\n' "$tag" > "$stage/PLATFORM"
  printf '__version__ = "%s"\n' "$version" > "$stage/torchmem/_version.py"
  # --no-isolation: build with the installed setuptools and wheel, offline;
  # -x: their presence and versions were checked above.
  (cd "$stage" && "$PYTHON" -m build --wheel --no-isolation -x --outdir "$out" .)
  echo "build.sh: $target -> $out/torchmem-$version-py3-none-$tag.whl"
}

# The targets build side by side: most of a build is single-threaded
# (linking, the Python backend).
pids=()
for target in "${targets[@]}"; do
  build_one "$target" >"$work/${target/\//-}.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!targets[@]}"; do
  if wait "${pids[$i]}"; then
    tail -n 1 "$work/${targets[$i]/\//-}.log" >&2
  else
    echo "build.sh: building ${targets[$i]} failed:" >&2
    cat "$work/${targets[$i]/\//-}.log" >&2
    failed=1
  fi
done
exit "$failed"
