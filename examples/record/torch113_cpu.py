"""CPU recordings with an old torch: Debian's python3-torch (1.13.1, CPU only), no GPU needed.

    apt-get install -y python3-torch
    /usr/bin/python3 torch113_cpu.py OUT_DIR

Writes, per scenario folder, what torch 1.13 writes on a CPU:
  trace.json.gz            torch.profiler (Kineto) export_chrome_trace, gzipped
  key_averages*.json       torch's own key_averages() rows (by name, by stack, by input shape):
                           the oracle for per-operator Self CPU Mem
  table.txt                torch's printed table, sorted by self CPU memory
  truth.json               versions and what the scenario did
and, for the legacy profiler (torch.autograd.profiler.profile(use_kineto=False)):
  legacy/trace.json.gz     its export_chrome_trace: a bare JSON array, the pre-Kineto schema

On a CPU torch 1.13 writes no allocator snapshot, no memory_stats / memory_summary (CUDA only) and
no export_memory_timeline (torch >= 2.1): those cells of the README's compatibility table stay empty.
"""

import gzip
import json
import os
import platform
import shutil
import sys
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

STEPS, WAIT, WARMUP, ACTIVE = 7, 1, 1, 4
BATCH, WIDTH, HIDDEN = 64, 256, 512


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")


def gzip_file(plain):
    with open(plain, "rb") as src, gzip.GzipFile(plain + ".gz", "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(plain)


def rows(averages, extra=None):
    out = []
    for avg in averages:
        row = {
            "key": avg.key,
            "count": int(avg.count),
            # torch 1.13 names them cuda_*; on a CPU they are 0 for every row.
            "self_device_memory_usage": int(avg.self_cuda_memory_usage),
            "device_memory_usage": int(avg.cuda_memory_usage),
            "self_cpu_memory_usage": int(avg.self_cpu_memory_usage),
            "cpu_memory_usage": int(avg.cpu_memory_usage),
        }
        if extra:
            row.update(extra(avg))
        out.append(row)
    return out


class Net(nn.Module):
    def __init__(self, leak):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, WIDTH)
        self.leak = leak
        self.cache = []

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.leak:
            self.cache.append(h.detach().clone())  # LEAK SITE: 64 x 512 fp32 = 128 KiB per step
        return self.fc2(h)


def train(out_dir, leak):
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model = Net(leak)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def ready(prof):
        plain = os.path.join(out_dir, "trace.json")
        prof.export_chrome_trace(plain)
        gzip_file(plain)
        write_json(os.path.join(out_dir, "key_averages.json"), rows(prof.key_averages()))
        write_json(os.path.join(out_dir, "key_averages_stack.json"),
                   rows(prof.key_averages(group_by_stack_n=5), lambda a: {"stack": list(a.stack or [])}))
        write_json(os.path.join(out_dir, "key_averages_shape.json"),
                   rows(prof.key_averages(group_by_input_shape=True), lambda a: {"input_shapes": str(a.input_shapes)}))
        with open(os.path.join(out_dir, "table.txt"), "w") as f:
            f.write(prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=30))

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                 on_trace_ready=ready, record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for _ in range(STEPS):
            x = torch.randn(BATCH, WIDTH)
            loss = model(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    return len(model.cache)


def legacy(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model = Net(False)
    with torch.autograd.profiler.profile(use_kineto=False, profile_memory=True, record_shapes=True) as prof:
        for _ in range(2):
            model(torch.randn(BATCH, WIDTH)).sum().backward()
    plain = os.path.join(out_dir, "trace.json")
    prof.export_chrome_trace(plain)
    gzip_file(plain)
    write_json(os.path.join(out_dir, "key_averages.json"), rows(prof.key_averages()))


def main(out):
    started = time.time()
    base = {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "recorded_with": "examples/record/torch113_cpu.py", "device": "cpu",
            "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE, "steps": STEPS}}
    for name, leak in (("cpu_train", False), ("cpu_leak", True)):
        kept = train(os.path.join(out, name), leak)
        write_json(os.path.join(out, name, "truth.json"), dict(base, scenario=name,
                   planted="keeps a clone of the hidden activation (64x512 fp32, 128 KiB) every step on the CPU" if leak else None,
                   leak_bytes_per_step=BATCH * HIDDEN * 4 if leak else 0, kept_tensors=kept))
    legacy(os.path.join(out, "cpu_train", "legacy"))
    print("done in %.1f s" % (time.time() - started))


if __name__ == "__main__":
    main(sys.argv[1])
