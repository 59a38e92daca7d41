"""Another process on the same GPU (issue 33).

    python3 smi_other.py OUT_FILE hold GIB SECONDS     allocate GIB, then sit idle (a zombie
                                                       once the trainer is gone)
    python3 smi_other.py OUT_FILE grow MIB SECONDS     allocate MIB every 0.25 s, then exit
"""

import json
import os
import sys
import time

import torch


def main(out, mode, amount, seconds):
    started = time.time()
    torch.zeros(1, device="cuda")
    kept = []
    events = []
    if mode == "hold":
        kept.append(torch.empty(int(float(amount) * 2**30), dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        events.append({"time": time.time(), "reserved": torch.cuda.memory_reserved()})
        with open(out, "w") as f:  # written before the idle wait: the holder may be killed
            json.dump({"role": "holder", "pid": os.getpid(), "gib": float(amount), "started": started,
                       "allocated": events}, f, indent=1)
        time.sleep(float(seconds))
        return
    end = started + float(seconds)
    while time.time() < end:
        kept.append(torch.empty(int(float(amount) * 2**20), dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        events.append({"time": time.time(), "reserved": torch.cuda.memory_reserved()})
        time.sleep(0.25)
    with open(out, "w") as f:
        json.dump({"role": "grower", "pid": os.getpid(), "mib_per_tick": float(amount),
                   "tick_seconds": 0.25, "started": started, "ended": time.time(),
                   "events": events}, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:5])
