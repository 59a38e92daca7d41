"""How a process ends after the snippet detached CUPTI (issue 17.6): every way a run may end,
each in its own process run under a time limit by teardown_exits.sh.

    python3 teardown_exits.py CASE OUT_DIR

CASE: user_profiler (the snippet's window, then a torch.profiler session of the user's own: it
must still see GPU kernels), launch_cost (launch cost of 2000 tiny kernels before the snippet,
after its window: CUPTI attached slows every launch), cudagraphs (torch.compile with CUDA graphs,
mode="reduce-overhead": torch keeps CUPTI attached then, and so must the snippet).
"teardown_values" lists what the snippet set TEARDOWN_CUPTI to at each profiler stop or step.
"""

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torchmem_profile import TorchMemProfile  # noqa: E402


def launches(x, n=2000):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


class Probe(TorchMemProfile):
    values = []

    def _set_teardown(self, on):
        super()._set_teardown(on)
        Probe.values.append(os.environ.get("TEARDOWN_CUPTI"))


def main(case, out_dir):
    x = torch.zeros(16, device="cuda")
    w = torch.randn(512, 512, device="cuda")
    work = lambda: (w @ w).sum()  # noqa: E731
    if case == "cudagraphs":
        compiled = torch.compile(lambda a: (a @ a).relu().sum(), mode="reduce-overhead")
        work = lambda: compiled(w)  # noqa: E731
        for _ in range(3):
            work()
    result = {"case": case, "teardown_env_before": os.environ.get("TEARDOWN_CUPTI")}
    launches(x)  # warm
    result["launch_us_before"] = min(launches(x) for _ in range(3))
    with Probe(out_dir=out_dir, wait=1, warmup=1, active=2, repeat=1) as tm:
        for _ in range(6):
            work()
            tm.step()
    result["teardown_values"] = Probe.values
    result["launch_us_after"] = min(launches(x) for _ in range(3))
    result["teardown_env_after"] = os.environ.get("TEARDOWN_CUPTI")
    if case == "user_profiler":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                (w @ w).sum()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        result["user_profiler_gpu_events"] = len(kernels)
    result["files"] = sorted(os.listdir(out_dir))
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
