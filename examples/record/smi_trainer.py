"""A training process watched by nvidia-smi (issue 33): loads its model and data, trains at a
steady pace, and exits; with --leak it keeps one 32 MiB activation per step.

    python3 smi_trainer.py OUT_DIR [--leak] [--seconds 12]

Writes, beside the snippet's steps log (TorchMemProfile with no profiler and no history):
  torch_mem.jsonl   per phase and per step: time, pid, memory_allocated(), memory_reserved(),
                    and mem_get_info() (free, total): torch's own numbers to reconcile smi with
  role.json         pid, what was planted, and the phase times
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torchmem_profile import TorchMemProfile  # noqa: E402

WIDTH, HIDDEN, BATCH = 4096, 16384, 512
STEP_SECONDS = 0.25
LEAK_BYTES = BATCH * HIDDEN * 4  # one fc1 activation: 32 MiB


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--leak", action="store_true")
    parser.add_argument("--seconds", type=float, default=12.0, help="training time")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "torch_mem.jsonl"), "a", buffering=1)

    def note(phase, step=None):
        free, total = torch.cuda.mem_get_info()
        log.write(json.dumps({"phase": phase, "step": step, "time": time.time(), "pid": os.getpid(),
                              "allocated": torch.cuda.memory_allocated(),
                              "reserved": torch.cuda.memory_reserved(),
                              "free": free, "total": total}) + "\n")

    phases = {"start": time.time()}
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    note("context")
    phases["context"] = time.time()
    # Startup: the model, then the data set moved to the GPU in chunks (a slow loader):
    # two seconds of growth that is not a leak.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, WIDTH)).cuda()
    note("model")
    data = []
    for _ in range(8):
        data.append(torch.randn(32, 1024, 1024, device="cuda"))  # 128 MiB a chunk
        torch.cuda.synchronize()
        note("data")
        time.sleep(0.25)
    phases["loaded"] = time.time()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    kept = []
    steps = int(args.seconds / STEP_SECONDS)
    with TorchMemProfile(out_dir=args.out, trace=False, history=False) as tm:
        for i in range(steps):
            t0 = time.time()
            x = data[i % len(data)].view(-1, 1024)[:BATCH].repeat(1, WIDTH // 1024)
            h = model[0](x)
            loss = F.mse_loss(model[2](torch.relu(h)), x)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if args.leak:
                kept.append(h.detach().clone())  # LEAK SITE: 512x16384 fp32 = 32 MiB per step
            torch.cuda.synchronize()
            tm.step()
            note("step", i)
            time.sleep(max(0.0, STEP_SECONDS - (time.time() - t0)))
    phases["trained"] = time.time()
    with open(os.path.join(args.out, "role.json"), "w") as f:
        json.dump({"role": "trainer", "pid": os.getpid(), "leak": args.leak,
                   "leak_bytes_per_step": LEAK_BYTES if args.leak else 0, "steps": steps,
                   "step_seconds": STEP_SECONDS, "phases": phases,
                   "files": sorted(os.path.basename(p) for p in tm.written)}, f, indent=1)
    note("exit")
    print("smi_trainer: pid %d, %d steps, leak=%s, reserved %d" % (
        os.getpid(), steps, args.leak, torch.cuda.memory_reserved()))


if __name__ == "__main__":
    main()
