# Extracts, from a Kineto trace (export_chrome_trace), what the chart demo
# needs without depending on the trace reader: the CPU ProfilerStep#N spans
# and the CUDA [memory] events' Total Allocated / Total Reserved, all in
# absolute ns (baseTimeNanoseconds + ts_us * 1000, the clock that
# export_memory_timeline uses).
# Usage: python3 extract_trace_fixture.py trace.json.gz out_dir
import gzip, json, sys
from fractions import Fraction

src, out = sys.argv[1], sys.argv[2]
d = json.load(gzip.open(src))
base = d.get("baseTimeNanoseconds", 0)
def ns(ts):  # ts is µs with ns decimals; exact via Fraction of its repr
    return base + int(round(Fraction(repr(ts)) * 1000))
ev = d["traceEvents"]
steps = sorted(
    ({"name": e["name"], "start_ns": ns(e["ts"]), "end_ns": ns(e["ts"]) + int(round(Fraction(repr(e["dur"])) * 1000))}
     for e in ev if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")),
    key=lambda s: s["start_ns"])
starts = [ns(e["ts"]) for e in ev if "ts" in e and e.get("ph") != "M"]
mem = [[ns(e["ts"]), e["args"]["Total Allocated"], e["args"]["Total Reserved"]]
       for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1 and e["args"].get("Device Id") == 0]
mem.sort(key=lambda m: m[0])
json.dump({"trace_start_ns": min(starts), "steps": steps}, open(f"{out}/profiler_steps.json", "w"), indent=1)
with gzip.open(f"{out}/memory_events_cuda0.json.gz", "wt") as f:
    json.dump(mem, f, separators=(",", ":"))
print(len(steps), "steps,", len(mem), "memory events")
