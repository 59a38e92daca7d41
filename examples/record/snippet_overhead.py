"""What the snippet costs per training step (issue 17.6): a 4-layer transformer LM (d_model 512,
8 heads, vocab 32000), bf16 autocast, AdamW, batch 16x256, one process per mode.

    python3 snippet_overhead.py MODE OUT_JSON [TORCHMEM_DIR]

MODE: none (no snippet), between (snippet entered, its one profiled window at steps 2-4 long
over: allocator history with stacks="python" + steps log), inside (every measured step inside a
profiled window), history_all (as between, with stacks="all"), history_off (as between,
TORCHMEM_HISTORY=0: steps log only). Step time: torch.cuda.synchronize() at each step's end in
every mode, so host-side costs show in full; median over the measured steps.
"""

import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import TorchMemProfile

VOCAB, D, HEADS, LAYERS, BATCH, SEQ = 32000, 512, 8, 4, 16, 256


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, D // HEADS).transpose(1, 3).unbind(2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, D))
        return x + self.mlp(self.ln2(x))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(SEQ, D))
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids):
        h = self.embed(ids) + self.pos
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def main(mode, out_json, tm_dir="/tmp/tm_overhead"):
    torch.manual_seed(0)
    model = LM().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device="cuda")

    def train_step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), ids[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(5):  # warm up kernels and the cache before any mode starts
        train_step()
    torch.cuda.synchronize()

    if mode == "none":
        tm, first, steps = None, 5, 45
    elif mode == "inside":
        tm = TorchMemProfile(out_dir=tm_dir, wait=1, warmup=1, active=40, repeat=1)
        first, steps = 4, 40  # measured steps 4..39, all inside the window (ProfilerStep#2..#41)
    else:
        kwargs = {"history_all": {"cpp_stacks": True}, "history_off": {"history": False}}.get(mode, {})
        tm = TorchMemProfile(out_dir=tm_dir, wait=1, warmup=1, active=3, repeat=1, **kwargs)
        first, steps = 8, 48  # the window (steps 2-4) was exported at step 5
    times = []
    if tm is not None:
        tm.__enter__()
    for i in range(steps):
        t0 = time.perf_counter()
        train_step()
        if tm is not None:
            tm.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    exit_s = None
    if tm is not None:
        t0 = time.perf_counter()
        tm.__exit__(None, None, None)
        exit_s = time.perf_counter() - t0
    measured = times[first:]
    import os

    files = {os.path.basename(p): os.path.getsize(p) for p in (tm.written if tm else []) if os.path.exists(p)}
    result = {"mode": mode, "median_ms": statistics.median(measured) * 1e3, "n": len(measured),
              "mean_ms": statistics.mean(measured) * 1e3, "min_ms": min(measured) * 1e3,
              "exit_s": exit_s, "files": files, "steps_ms": [round(t * 1e3, 3) for t in times]}
    with open(out_json, "a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "steps_ms"}))


if __name__ == "__main__":
    main(*sys.argv[1:])
