"""Makes the wheel a platform wheel that carries a program.

pyproject.toml holds the metadata; this file only does what it cannot say:
install the torchmem binary as a script (into the environment's bin/, on
PATH) copied byte for byte, and tag the wheel py3-none-<platform> with the
platform build.sh wrote into PLATFORM (the binary's, not this interpreter's).
"""

import os

from setuptools import Distribution, setup

# setuptools' own distutils (imported after setuptools, so it is the one used).
from distutils.command.build_scripts import build_scripts

try:  # setuptools 70.1 and later carry bdist_wheel
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # Debian bookworm: setuptools 66 with python3-wheel
    from wheel.bdist_wheel import bdist_wheel


def _platform():
    with open("PLATFORM", encoding="ascii") as f:
        return f.read().strip()


class BinaryScripts(build_scripts):
    """Copies scripts unchanged: the stock command reads them as text to
    rewrite a '#!python' line, which a compiled program does not have."""

    def run(self):
        self.mkpath(self.build_dir)
        for script in self.scripts:
            dest = os.path.join(self.build_dir, os.path.basename(script))
            self.copy_file(script, dest)
            os.chmod(dest, 0o755)


class PlatformDistribution(Distribution):
    """Not pure: the wheel carries a compiled program. This also installs the
    modules at the wheel's root (platlib) rather than under .data/purelib."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """Any Python 3, no Python ABI (the package's Python is pure), one
    platform: the one the binary was compiled for."""

    def get_tag(self):
        return "py3", "none", _platform()


setup(
    scripts=["bin/torchmem"],
    distclass=PlatformDistribution,
    cmdclass={"build_scripts": BinaryScripts, "bdist_wheel": PlatformWheel},
)
