"""What the allocator history costs per step, measured without drift (issue 17.6).

    python3 history_cost.py small|large OUT_JSONL

One process, the LMs of snippet_overhead.py: blocks of 10 steps alternate between "off" (no
recording) and "on" (the snippet's between-window state: torch's allocator history with
stacks="python", context="alloc", max_entries 100000, plus one steps-log line per step), 10
blocks each, after 20 warm-up steps. Alternating blocks in one process cancel the drift that
separate runs show (clock, thermal, other tenants). small: synchronized every step (host costs
in full), median step; large: one synchronize per block, mean step (as training runs).
"""

import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SIZE, OUT = sys.argv[1], sys.argv[2]
sys.argv = [sys.argv[0], "sync", "default", "/dev/null", SIZE]  # snippet_overhead sizes its LM from argv
import snippet_overhead as so  # noqa: E402

sys.path.insert(0, so.os.path.join(so.os.path.dirname(so.os.path.abspath(__file__)), ".."))
from torchmem_profile import _read_memory_stats  # noqa: E402


def main(size, out_path):
    sync = size == "small"
    torch.manual_seed(0)
    model = so.LM().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, so.VOCAB, (so.BATCH, so.SEQ + 1), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, so.VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    record = torch.cuda.memory._record_memory_history
    dev = torch.cuda.current_device()
    times = {"off": [], "on": []}
    log = open("/tmp/history_cost_steps.jsonl", "w")
    for block in range(20):
        mode = "on" if block % 2 else "off"
        if mode == "on":
            record(max_entries=100000, stacks="python", context="alloc")
        torch.cuda.synchronize()
        t_block = time.perf_counter()
        for i in range(10):
            t0 = time.perf_counter()
            step()
            if mode == "on":
                log.write(json.dumps(dict(step=i, time=time.time(), **_read_memory_stats(dev))) + "\n")
            if sync:
                torch.cuda.synchronize()
                times[mode].append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        if not sync:
            times[mode].append((time.perf_counter() - t_block) / 10)
        if mode == "on":
            record(enabled=None)
    pick = statistics.median
    off, on = pick(times["off"]) * 1e3, pick(times["on"]) * 1e3
    result = {"size": size, "sync": sync, "off_ms": round(off, 3), "on_ms": round(on, 3),
              "cost": round(on / off - 1, 4), "n": len(times["on"]),
              "off_all_ms": [round(t * 1e3, 3) for t in times["off"]], "on_all_ms": [round(t * 1e3, 3) for t in times["on"]]}
    with open(out_path, "a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("all_ms")}))


if __name__ == "__main__":
    main(SIZE, OUT)
