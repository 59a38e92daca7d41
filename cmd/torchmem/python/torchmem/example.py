"""The example trace that comes with the wheel: a real training run recorded on an H200 in
which a module keeps a 4 MiB activation copy every forward (examples/traces in the repository).

    torchmem analyze "$(python -m torchmem.example)"     # prints LEAK 4.00 MB per step; exit 1
"""

import os

EXAMPLE_TRACE = "leak_module_cache.trace.json.gz"


def example_trace():
    """The path of the bundled example trace."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples", EXAMPLE_TRACE)


if __name__ == "__main__":
    print(example_trace())
