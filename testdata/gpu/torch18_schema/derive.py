#!/usr/bin/env python3
"""Derive a torch 1.8/1.9 Kineto-schema trace from a torch 2.11 recording.

Usage: derive.py IN.pt.trace.json.gz OUT.pt.trace.json.gz

What torch 1.8/1.9 wrote (/work/shared/FORMATS.md section 8, and the
TensorBoard plugin's resnet50 sample in testdata/public/kineto_tb_plugin):
categories Operator (ProfilerStep#N is one), Runtime, Kernel, Memcpy,
Memset; GPU events spell "external id"; [memory] instants have no cat and
carry only Device Type, Device Id and Bytes (no Addr, no Total Allocated,
no Total Reserved), with integer microsecond timestamps. Events torch 1.8
did not write (python_function, flows, gpu_user_annotation, cuda_driver)
are dropped, and so are the newer top-level keys. Everything kept is
copied unchanged: the same steps, the same Bytes at the same times.
"""
import gzip
import json
import sys

CATS = {
    "cpu_op": "Operator",
    "user_annotation": "Operator",
    "cuda_runtime": "Runtime",
    "kernel": "Kernel",
    "gpu_memcpy": "Memcpy",
    "gpu_memset": "Memset",
    "Trace": "Trace",
}
OP_ARGS = ("External id", "Input Dims", "Input type", "Call stack")
GPU_ARGS = ("device", "context", "stream", "correlation", "bytes")


def derive(doc):
    out = []
    for e in doc["traceEvents"]:
        name, cat, ph = e.get("name"), e.get("cat"), e.get("ph")
        if name == "[memory]":
            a = e["args"]
            out.append({"ph": "i", "s": "t", "name": "[memory]", "pid": e["pid"], "tid": e["tid"],
                        "ts": int(e["ts"]),
                        "args": {"Device Type": a["Device Type"], "Device Id": a["Device Id"], "Bytes": a["Bytes"]}})
            continue
        if ph == "M":
            out.append(e)
            continue
        if ph != "X" or cat not in CATS:
            continue
        n = dict(e)
        n["cat"] = CATS[cat]
        a = e.get("args", {})
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            n["args"] = {k: a[k] for k in GPU_ARGS if k in a}
            if "External id" in a:
                n["args"]["external id"] = a["External id"]
        else:
            n["args"] = {k: a[k] for k in OP_ARGS if k in a}
            if "correlation" in a:
                n["args"]["correlation"] = a["correlation"]
        out.append(n)
    return {"schemaVersion": 1, "deviceProperties": doc.get("deviceProperties", []), "traceEvents": out}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    with gzip.GzipFile(dst, "wb", mtime=0) as f:
        f.write(json.dumps(derive(doc), separators=(",", ":")).encode())


if __name__ == "__main__":
    main()
