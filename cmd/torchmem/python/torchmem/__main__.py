"""`python -m torchmem ARGS` runs the torchmem executable with ARGS."""

import os
import sys

from torchmem import find_torchmem_bin


def main():
    exe = find_torchmem_bin()
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
