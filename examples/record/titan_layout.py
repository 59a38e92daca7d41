"""The dump trees TorchTitan and torchtune write, made with the same torch calls their profiling
modules make (neither framework runs on the recording machine: no network for their models and
data), under torchrun with gloo ranks sharing one GPU; rank 1 keeps 2 MiB per step.

    torchrun --standalone --nproc_per_node=2 titan_layout.py OUT_DIR titan
    torchrun --standalone --nproc_per_node=2 titan_layout.py OUT_DIR tune

titan (torchtitan/tools/profiling.py): the allocator history on from the start
(max_entries=100000); every profile_freq=10 steps
  OUT_DIR/memory_snapshot/iteration_<N>/rank<R>_memory_snapshot.pickle   (pickle.dump of _snapshot())
and the profiler (schedule wait=freq-warmup-active, warmup=3, active=1, record_shapes)
  OUT_DIR/profile_trace/iteration_<N>/rank<R>_trace.json                 (export_chrome_trace)
tune (torchtune/training/_profiler.py): profile_memory, with_stack, record_shapes; per cycle
  OUT_DIR/iteration_<N>/rank<R>.<ns>.pt.trace.json.gz   (tensorboard_trace_handler, worker rank<R>)
  OUT_DIR/iteration_<N>/rank<R>_memory_snapshot.pickle  (torch.cuda.memory._dump_snapshot)
"""

import json
import os
import pickle
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_common import site, write_json  # noqa: E402

MIB = 1 << 20
STEPS, FREQ, WARMUP, ACTIVE = 31, 10, 3, 1


class Net(nn.Module):
    def __init__(self, leak):
        super().__init__()
        self.fc1 = nn.Linear(512, 2048)
        self.fc2 = nn.Linear(2048, 512)
        self.leak = leak
        self.kept = []

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.leak:
            self.kept.append(torch.empty(MIB // 2, device=x.device))  # RANK LEAK SITE: 2 MiB per step
        return self.fc2(h)


def main():
    out, layout = sys.argv[1], sys.argv[2]
    started = time.time()
    torch.cuda.set_device(0)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(Net(leak=(rank == 1)).cuda(), device_ids=[0])
    opt = torch.optim.AdamW(model.parameters())
    torch.cuda.memory._record_memory_history(max_entries=100000)

    def step():
        loss = model(torch.randn(128, 512, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    if layout == "titan":
        trace_dir = os.path.join(out, "profile_trace")

        def trace_handler(prof):
            d = os.path.join(trace_dir, "iteration_%d" % prof.step_num)
            os.makedirs(d, exist_ok=True)
            prof.export_chrome_trace("%s/rank%d_trace.json" % (d, rank))

        prof = torch.profiler.profile(
            activities=acts, schedule=torch.profiler.schedule(wait=FREQ - WARMUP - ACTIVE,
                                                              warmup=WARMUP, active=ACTIVE),
            on_trace_ready=trace_handler, record_shapes=True)
        snap_dir = os.path.join(out, "memory_snapshot")
        with prof:
            for i in range(1, STEPS):
                step()
                prof.step()
                if i % FREQ == 0:
                    d = os.path.join(snap_dir, "iteration_%d" % i)
                    os.makedirs(d, exist_ok=True)
                    with open("%s/rank%d_memory_snapshot.pickle" % (d, rank), "wb") as f:
                        pickle.dump(torch.cuda.memory._snapshot(), f, protocol=pickle.HIGHEST_PROTOCOL)
    else:
        def trace_handler(prof):
            d = os.path.join(out, "iteration_%d" % prof.step_num)
            os.makedirs(d, exist_ok=True)
            torch.profiler.tensorboard_trace_handler(d, worker_name="rank%d" % rank, use_gzip=True)(prof)
            torch.cuda.memory._dump_snapshot("%s/rank%d_memory_snapshot.pickle" % (d, rank))
            with open("%s/rank%d_key_averages.txt" % (d, rank), "w") as f:
                f.write(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=25))

        prof = torch.profiler.profile(
            activities=acts, schedule=torch.profiler.schedule(wait=5, warmup=3, active=2, repeat=3),
            on_trace_ready=trace_handler, record_shapes=True, profile_memory=True, with_stack=True)
        with prof:
            for i in range(STEPS):
                step()
                prof.step()
    dist.barrier()
    if rank == 0:
        write_json(os.path.join(out, "truth.json"), {
            "scenario": "%s_layout" % layout, "world_size": world, "leaky_rank": 1,
            "leak_bytes_per_step": {"0": 0, "1": 2 * MIB}, "leak_site": site("# RANK LEAK SITE"),
            "layout": __doc__.split(layout + " (")[1].split("\n\n")[0] if layout + " (" in __doc__ else layout,
            "recorded_with": "examples/record/titan_layout.py: the framework's torch calls, not "
                             "the framework itself", "torch": torch.__version__,
            "seconds": round(time.time() - started, 3)})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
