"""Rebuild the TensorBoard plugin's memory-view test traces as testdata.

    python3 extract_tests.py path/to/kineto/tb_plugin/test/test_profiler.py

From pytorch/kineto tb_plugin/test/test_profiler.py (BSD-3-Clause; the plugin was removed in kineto
commit 94979607, read at its parent): test_memory_view's trace and expected rows, and
TestMemoryCurve's events and expected curve. Each trace is written twice: with the torch 1.8/1.9
category names the test uses (Operator, Runtime, Kernel, Memcpy, Memset) and with today's (cpu_op,
user_annotation for ProfilerStep#N and DataLoader ranges, cuda_runtime, kernel, gpu_memcpy,
gpu_memset). The plugin wrapped the bare event list as {"schemaVersion": 1, "traceEvents": [...]}.
"""

import ast
import gzip
import json
import re
import sys

NEW_CATS = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel",
            "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}


def write(path, value):
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(value, indent=1).encode())


def modern(events):
    out = []
    for e in events:
        e = dict(e)
        if e.get("cat") in NEW_CATS:
            e["cat"] = NEW_CATS[e["cat"]]
        if e.get("cat") == "cpu_op" and (e["name"].startswith("ProfilerStep#") or e["name"].startswith("enumerate(DataLoader)")):
            e["cat"] = "user_annotation"
        out.append(e)
    return out


def main(src):
    text = open(src).read()
    body = text[text.index("def test_memory_view(self):"):text.index("def test_group_by_kernel_columns")]
    events = json.loads(re.search(r'json_content = """(.*?)"""', body, re.S).group(1))
    def table(name):
        return ast.literal_eval(re.search(name + r" = (\{.*?\n        \})", body, re.S).group(1))
    expected = {"columns": ["self increase size", "self allocation size", "self allocation count",
                            "increase size", "allocation size", "allocation count", "calls"],
                "GPU0": table("gpu_expected_data"), "CPU": table("cpu_expected_data")}
    write("memory_view.old_names.json.gz", {"schemaVersion": 1, "traceEvents": events})
    write("memory_view.new_names.json.gz", {"schemaVersion": 1, "traceEvents": modern(events)})
    with open("memory_view.expected.json", "w") as f:
        json.dump(expected, f, indent=1)

    curve = text[text.index("class TestMemoryCurve"):text.index("class TestModuleView")]
    cpu = ast.literal_eval(re.search(r"self.event_data_cpu = (\[.*?\n        \])", curve, re.S).group(1))
    gpu = ast.literal_eval(re.search(r"self.event_data_gpu = (\[.*?\n        \])", curve, re.S).group(1))
    def entry(ts, dev, dev_id, addr, size, allocated, reserved):
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": 0, "tid": 0, "ts": ts,
                "args": {"Device Type": dev, "Device Id": dev_id, "Addr": addr, "Bytes": size,
                         "Total Allocated": allocated, "Total Reserved": reserved}}
    events = [entry(*e) for e in sorted(cpu + gpu, key=lambda e: e[0])]
    write("memory_curve.json.gz", {"schemaVersion": 1, "traceEvents": events})
    with open("memory_curve.expected.json", "w") as f:
        json.dump({"columns": ["ts", "device type", "device id", "addr", "bytes", "total allocated",
                               "total reserved"], "CPU": cpu, "GPU0": gpu}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
