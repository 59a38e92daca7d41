"""What the snippet costs between profiled windows, by history policy (issue 34.4), without drift.

    python3 watch_cost.py small|large OUT_JSONL

One process, the LMs of snippet_overhead.py (small: 4-layer LM, d512, batch 16x256, synchronized
every step, median step; large: 8-layer d1024, batch 32x512, one synchronize per block, mean step).
After 20 warm-up steps, blocks of 10 steps cycle through three modes, 10 blocks each:
  off      no snippet;
  default  the snippet's default state between windows (history "window": off after the window;
           tm.step() writes the steps log, feeds LeakWatch and checks near-OOM);
  history  the old default: allocator history always on (stacks="python", context="alloc",
           max_entries 100000), plus the same tm.step().
Alternating blocks in one process cancel the drift that separate runs show.
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

from snippet_common import TorchMemProfile  # noqa: E402

MODES = ("off", "default", "history")


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
    # The between-window state: no profiler, the window's history already stopped.
    tm = TorchMemProfile(out_dir="/tmp/watch_cost_out", trace=False, history="off")
    tm.__enter__()
    record = torch.cuda.memory._record_memory_history
    times = {m: [] for m in MODES}
    for block in range(10 * len(MODES)):
        mode = MODES[block % len(MODES)]
        if mode == "history":
            record(max_entries=100000, stacks="python", context="alloc")
        torch.cuda.synchronize()
        t_block = time.perf_counter()
        for _ in range(10):
            t0 = time.perf_counter()
            step()
            if mode != "off":
                tm.step()
            if sync:
                torch.cuda.synchronize()
                times[mode].append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        if not sync:
            times[mode].append((time.perf_counter() - t_block) / 10)
        if mode == "history":
            record(enabled=None)
    tm.__exit__(None, None, None)
    pick = statistics.median
    ms = {m: pick(times[m]) * 1e3 for m in MODES}
    result = {"size": size, "sync": sync, "n": len(times["off"]),
              "ms": {m: round(v, 3) for m, v in ms.items()},
              "cost_default": round(ms["default"] / ms["off"] - 1, 4),
              "cost_history": round(ms["history"] / ms["off"] - 1, 4),
              "alarms": len(tm.alarms),
              "all_ms": {m: [round(t * 1e3, 3) for t in times[m]] for m in MODES}}
    with open(out_path, "a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "all_ms"}), flush=True)


if __name__ == "__main__":
    main(SIZE, OUT)
