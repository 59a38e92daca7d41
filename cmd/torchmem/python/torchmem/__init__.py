"""torchmem: where did my GPU memory go?

The `torchmem` command this wheel installs (on PATH; also `python -m
torchmem`) reads what PyTorch's profiler writes and tells which operators and
lines hold GPU memory, whether it leaks step over step, and why a run ran out
of memory. The profiling snippet that records those files comes with it, under
both names:

    from torchmem import TorchMemProfile          # or
    from torchmem_profile import TorchMemProfile

    with TorchMemProfile() as tm:
        for batch in loader:
            train_step(batch)
            tm.step()

then `torchmem analyze torchmem_out/`. Importing this package does not import
torch; the snippet's names load it when first used (without torch installed,
that raises ModuleNotFoundError saying torch is needed). The wheel carries one
real example trace: `torchmem analyze "$(python -m torchmem.example)"`.
"""

import os
import shutil
import sys
import sysconfig

from torchmem._version import __version__


def example_trace():
    """The path of the bundled example trace (torchmem.example, imported
    here on first use: importing it with the package made `python -m
    torchmem.example` warn that the module was already in sys.modules)."""
    from torchmem.example import example_trace as path

    return path()


def find_torchmem_bin():
    """Returns the path of the installed torchmem executable: the scripts
    directory of this environment, then of the user scheme (pip --user), then
    PATH."""
    dirs = [sysconfig.get_path("scripts")]
    try:
        user = sysconfig.get_preferred_scheme("user")  # Python 3.10+
    except AttributeError:
        user = "osx_framework_user" if getattr(sys, "_framework", "") else "posix_user"
    if user in sysconfig.get_scheme_names():
        dirs.append(sysconfig.get_path("scripts", scheme=user))
    for d in dirs:
        path = os.path.join(d, "torchmem")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    path = shutil.which("torchmem")
    if path:
        return path
    raise FileNotFoundError(f"the torchmem executable is in none of {dirs} nor on PATH")


def __getattr__(name):
    # The snippet's names (TorchMemProfile, TorchMemCallback, ...) come from
    # torchmem_profile, its one source, imported on first use because it
    # imports torch. Without torch that is one ModuleNotFoundError saying
    # so; an ImportError of a framework the snippet needs for that name
    # reaches the caller as it is.
    if not name.startswith("_"):
        try:
            import torchmem_profile
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            # The snippet's own sentence (torch is needed, where to get
            # it), without the chain of imports that led to it.
            raise ModuleNotFoundError(str(e), name="torch") from None

        try:
            return getattr(torchmem_profile, name)
        except AttributeError:
            pass
    raise AttributeError(f"module 'torchmem' has no attribute {name!r}")
