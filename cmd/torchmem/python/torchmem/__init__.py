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
from torchmem.example import example_trace


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
    # imports torch. An ImportError of torch or of a framework the snippet
    # needs for that name reaches the caller as it is.
    if not name.startswith("_"):
        import torchmem_profile

        try:
            return getattr(torchmem_profile, name)
        except AttributeError:
            pass
    raise AttributeError(f"module 'torchmem' has no attribute {name!r}")
