"""A real CUDA out-of-memory error inside the profiled window: one step asks for 300 GiB, the
error is caught, training goes on and the profiler finishes its cycle. The trace gets an
[OutOfMemory] event and the allocator snapshot an `oom` entry in device_traces.

    python3 oom.py OUT_DIR
"""

import gzip
import json
import pickle
import sys
import time

import torch
import torch.nn as nn

from record_common import base_truth, run_profiled, site, write_json

BATCH, WIDTH = 256, 1024
OOM_BYTES = 300 * 2**30
OOM_STEP = 3  # wait=step 0, warmup=step 1, active=steps 2..6
ACTIVE = 5


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, 4096), nn.ReLU(), nn.Linear(4096, WIDTH)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    caught = []

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i == OOM_STEP:
            try:
                torch.empty(OOM_BYTES, dtype=torch.uint8, device="cuda")  # OOM SITE
            except torch.OutOfMemoryError as err:
                caught.append(str(err).splitlines()[0])

    lines = run_profiled(out_dir, step, active=ACTIVE, snapshot=True)

    # Check what was recorded, so the truth says what the files really hold.
    with gzip.open(out_dir + "/trace.json.gz", "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data  # old exports: a bare list
    oom_events = [e for e in events if e.get("name") == "[OutOfMemory]"]
    with open(out_dir + "/snapshot.pickle", "rb") as f:
        snapshot = pickle.load(f)
    oom_entries = [
        {"device": device, "size": entry.get("size"), "time_us": entry.get("time_us")}
        for device, trace in enumerate(snapshot["device_traces"])
        for entry in trace
        if entry.get("action") == "oom"
    ]
    truth = base_truth("oom", started, {"wait": 1, "warmup": 1, "active": ACTIVE})
    truth.update(
        {
            "planted": "torch.empty(300 GiB, uint8) at profiler step %d, inside the active window; "
            "torch.OutOfMemoryError caught, training continues" % OOM_STEP,
            "leak_bytes_per_step": 0,
            "oom_request_bytes": OOM_BYTES,
            "oom_step": OOM_STEP,
            "oom_site": site("# OOM SITE"),
            "caught": caught,
            "trace_out_of_memory_events": [e.get("args", {}) for e in oom_events],
            "snapshot_oom_entries": oom_entries,
            "num_ooms_after": lines[-1]["num_ooms"],
            "num_alloc_retries_after": lines[-1]["num_alloc_retries"],
        }
    )
    write_json(out_dir + "/truth.json", truth)
    if not caught or not oom_events or not oom_entries:
        sys.exit("oom: expected an OOM in the trace and the snapshot, got %d and %d"
                 % (len(oom_events), len(oom_entries)))


if __name__ == "__main__":
    main(sys.argv[1])
