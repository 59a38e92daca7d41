"""A TORCHMEM_NOTIFY command for tests: appends what it was given (stdin, the TORCHMEM_ALARM_*
variables) to the file named by its argument, as one JSON line."""

import json
import os
import sys

with open(sys.argv[1], "a") as f:
    env = {k: v for k, v in os.environ.items() if k.startswith("TORCHMEM_ALARM_")}
    f.write(json.dumps({"argv": sys.argv[1:], "stdin": sys.stdin.read(), "env": env}) + "\n")
