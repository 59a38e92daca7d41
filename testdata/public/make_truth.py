"""Independent figures of the public traces here, for the tests (plain Python, no torchmem).

    python3 make_truth.py      # writes <trace>.truth.json beside each trace listed below

events_by_category: X events per "cat"; steps: the ProfilerStep#N numbers; gpu_memory_events:
[memory] events with Device Type != 0; with_addr / with_total_allocated / with_total_reserved:
how many of those carry the field; running_sum_peak: per GPU, the largest running sum of Bytes over
its [memory] events in time order (file order on ties), and running_sum_end: the sum at the end;
hip_copy_bytes: the sum of the "size" strings of ROCm's hipMemcpyWithStream calls.
"""

import collections
import gzip
import json

TRACES = [
    "kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz",
    "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/mtia_inference_rank_0.json.gz",
]


def truth(path):
    with gzip.open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    cats = collections.Counter(e.get("cat") for e in events if e.get("ph") == "X")
    steps = sorted(int(e["name"].split("#")[1]) for e in events
                   if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
    mem = [(i, e) for i, e in enumerate(events) if e.get("name") == "[memory]"
           and e.get("args", {}).get("Device Type", 0) != 0]
    mem.sort(key=lambda p: (p[1]["ts"], p[0]))
    sums, peaks = collections.Counter(), {}
    for _, e in mem:
        dev = str(e["args"].get("Device Id"))
        sums[dev] += e["args"]["Bytes"]
        peaks[dev] = max(peaks.get(dev, sums[dev]), sums[dev])
    has = lambda k: sum(1 for _, e in mem if k in e["args"])
    return {
        "events_by_category": dict(sorted(cats.items(), key=lambda kv: str(kv[0]))),
        "steps": steps,
        "gpu_memory_events": len(mem),
        "with_addr": has("Addr"),
        "with_total_allocated": has("Total Allocated"),
        "with_total_reserved": has("Total Reserved"),
        "running_sum_peak": peaks,
        "running_sum_end": dict(sums),
        "hip_copy_bytes": sum(int(e["args"]["size"]) for e in events
                              if e.get("name") == "hipMemcpyWithStream" and "size" in e.get("args", {})),
        "string_fields": sorted({"%s %s.%s" % (e.get("cat"), e.get("name") if e.get("cat") != "kernel" else "*", k)
                                 for e in events for k, v in (e.get("args") or {}).items()
                                 if k in ("stream", "size", "bytes", "device") and isinstance(v, str)}),
    }


for path in TRACES:
    out = path.replace(".pt.trace.json.gz", ".truth.json").replace(".json.gz", ".truth.json")
    with open(out, "w") as f:
        json.dump(truth(path), f, indent=1)
        f.write("\n")
    print(out)
