"""What the snippet costs per training step (issue 17.6): a 4-layer transformer LM (d_model 512,
8 heads, vocab 32000), bf16 autocast, AdamW, batch 16x256.

    python3 snippet_overhead.py sync|nosync VARIANT OUT_JSONL [small|large]

One process measures, in order, after 20 warm-up steps: "none" (no snippet, 45 steps),
"between" (TorchMemProfile entered, its one window at steps 2-4 long over: steps 8-47),
"none_after" (the snippet's block has ended: 45 steps, as "none"; a cost that outlives the block
shows here), and, for VARIANT default, "inside" (a second TorchMemProfile whose window covers
steps 2-41: steps 4-39 measured). small: the LM below (host-bound, ~8 ms a step); large:
d_model 1024, 8 layers, batch 32x512 (GPU-bound, as most training). VARIANT changes the snippet of "between": default, no_history
(history=False), trace_off (trace=False: history and steps log only), cpp_stacks
(cpp_stacks=True), keep_cupti (TEARDOWN_CUPTI=0: CUPTI stays attached after the window), steps_only
(trace=False, history=False: the steps log alone).
sync: torch.cuda.synchronize() after every step, median step time (host costs show in full);
nosync: one synchronize at the end of the measured steps, mean step time (as training runs).
"""

import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import TorchMemProfile

VOCAB, D, HEADS, LAYERS, BATCH, SEQ = 32000, 512, 8, 4, 16, 256
if len(sys.argv) > 4 and sys.argv[4] == "large":
    D, HEADS, LAYERS, BATCH, SEQ = 1024, 16, 8, 32, 512


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


def main(sync, variant, out_json, size="small"):
    sync = sync == "sync"
    if variant == "keep_cupti":
        os.environ["TEARDOWN_CUPTI"] = "0"
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

    for _ in range(20):  # warm up kernels and the allocator's cache
        train_step()
    torch.cuda.synchronize()

    def measure(mode, tm, steps, first):
        times = []
        if tm is not None:
            tm.__enter__()
        block_start = None
        for i in range(steps):
            if i == first:
                torch.cuda.synchronize()
                block_start = time.perf_counter()
            t0 = time.perf_counter()
            train_step()
            if tm is not None:
                tm.step()
            if sync:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        block = (time.perf_counter() - block_start) / (steps - first)
        exit_s = None
        if tm is not None:
            t0 = time.perf_counter()
            tm.__exit__(None, None, None)
            exit_s = time.perf_counter() - t0
        measured = times[first:]
        files = {os.path.basename(p): os.path.getsize(p) for p in (tm.written if tm else []) if os.path.exists(p)}
        result = {"mode": mode, "variant": variant, "size": size, "sync": sync, "n": len(measured),
                  "step_ms": (statistics.median(measured) if sync else block) * 1e3,
                  "median_ms": statistics.median(measured) * 1e3, "block_mean_ms": block * 1e3,
                  "exit_s": exit_s, "files": files, "steps_ms": [round(t * 1e3, 3) for t in times]}
        with open(out_json, "a") as f:
            f.write(json.dumps(result) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k != "steps_ms"}))

    tm_dir = "/tmp/tm_overhead_%s_%s_%d" % (variant, "sync" if sync else "nosync", os.getpid())
    kwargs = {"no_history": {"history": False}, "trace_off": {"trace": False},
              "steps_only": {"trace": False, "history": False},
              "cpp_stacks": {"cpp_stacks": True}, "no_stack": {"with_stack": False}}.get(variant, {})
    measure("none", None, 45, 5)
    measure("between", TorchMemProfile(out_dir=tm_dir, wait=1, warmup=1, active=3, repeat=1, **kwargs), 48, 8)
    measure("none_after", None, 45, 5)
    if variant == "default":
        measure("inside", TorchMemProfile(out_dir=tm_dir, wait=1, warmup=1, active=40, repeat=1), 40, 4)


if __name__ == "__main__":
    main(*sys.argv[1:])
