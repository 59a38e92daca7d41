#!/usr/bin/env python3
"""Synthetic pickles for the decoder tests, written by CPython's pickle.

For each protocol 2..5: values_pN.pickle holds edge-case plain values and
values_pN.json the same data as JSON (tuples as lists, bytes as
"bytes:<hex>"), so the Go test compares its decoding with CPython's own
reading. snapshot_pN.pickle is a tiny allocator snapshot with shared frame
dicts, as torch writes them. Refusals: global_pN.pickle (a class instance),
overflow_*.pickle (ints beyond 64 bits).

Regenerate: cd memtimeline/snapshot/testdata/pickle && python3 gen_synthetic.py
"""
import collections
import json
import pickle


def values(proto):
    shared = ["shared", 1]
    v = {
        "ints": [0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**31, -2**31 - 1,
                 2**59 - 1, 2**59, -2**59, -2**59 - 1, 2**63 - 1, -2**63, 2**63, 2**64 - 1],
        "floats": [0.0, -0.5, 0.1, 1e300, -2.5e-300],
        "bools": [True, False, None],
        "strs": ["", "a", "é∑😀", "x" * 300, "\u0000nul"],
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "nested": {"a": [{"b": [[], {}]}], "c": ([1], {"d": None})},
        "long_list": list(range(2500)),
        "long_dict": {"k%d" % i: i for i in range(1200)},
        "shared": [shared, shared, {"again": shared}],
    }
    if proto >= 3:
        v["bytes"] = [b"", b"\x00\xff", b"z" * 300]
    return v


def to_json(x):
    if isinstance(x, dict):
        return {k: to_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_json(v) for v in x]
    if isinstance(x, bytes):
        return "bytes:" + x.hex()
    return x


def snapshot():
    f1 = {"filename": "/home/u/train.py", "line": 12, "name": "step"}
    f0 = {"filename": "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", "line": 134, "name": "forward"}
    fc = {"filename": "??", "line": 0, "name": "torch::unwind::unwind()"}
    blocks = [
        {"address": 2**46, "size": 1048576, "requested_size": 1000000, "state": "active_allocated", "frames": [fc, f0, f1]},
        {"address": 2**46 + 1048576, "size": 1048576, "requested_size": 0, "state": "inactive", "frames": []},
    ]
    seg = {"device": 0, "address": 2**46, "total_size": 2097152, "allocated_size": 1048576,
           "active_size": 1048576, "requested_size": 1000000, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
    trace = [
        {"action": "segment_alloc", "addr": 2**46, "size": 2097152, "stream": 0, "time_us": 10, "frames": [fc, f0, f1]},
        {"action": "alloc", "addr": 2**46, "size": 1048576, "stream": 0, "time_us": 11, "frames": [fc, f0, f1]},
        {"action": "alloc", "addr": 2**46 + 1048576, "size": 1048576, "stream": 0, "time_us": 12, "frames": [fc, f0, f1]},
        {"action": "free_requested", "addr": 2**46 + 1048576, "size": 1048576, "stream": 0, "time_us": 13, "frames": [fc, f1]},
        {"action": "free_completed", "addr": 2**46 + 1048576, "size": 1048576, "stream": 0, "time_us": 14, "frames": [fc, f1]},
        {"action": "oom", "device_free": 4096, "size": 2**40, "stream": 0, "time_us": 15, "frames": [fc, f1]},
    ]
    return {
        "segments": [seg],
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False,max_split_size_mb:128",
                               "max_split_size": 134217728, "garbage_collection_threshold": 0.6,
                               "expandable_segments": False, "roundup_power2_divisions": {"1": 4, "2": 0}},
        "external_annotations": [{"stage": "START", "name": "ProfilerStep#0", "device": 0, "time_us": 9},
                                 {"stage": "END", "name": "ProfilerStep#0", "device": 0, "time_us": 20}],
    }


for proto in (2, 3, 4, 5):
    v = values(proto)
    with open("values_p%d.pickle" % proto, "wb") as f:
        pickle.dump(v, f, protocol=proto)
    with open("values_p%d.json" % proto, "w") as f:
        json.dump(to_json(v), f, ensure_ascii=False)
    with open("snapshot_p%d.pickle" % proto, "wb") as f:
        pickle.dump(snapshot(), f, protocol=proto)
    with open("global_p%d.pickle" % proto, "wb") as f:
        pickle.dump({"segments": collections.OrderedDict(a=1)}, f, protocol=proto)

with open("overflow_pos.pickle", "wb") as f:
    pickle.dump({"segments": [{"address": 2**64}]}, f, protocol=4)
with open("overflow_neg.pickle", "wb") as f:
    pickle.dump({"segments": [{"address": -2**63 - 1}]}, f, protocol=4)
with open("negative_address.pickle", "wb") as f:
    pickle.dump({"segments": [{"address": -5}]}, f, protocol=4)
with open("wrong_type.pickle", "wb") as f:
    pickle.dump({"segments": [{"total_size": "big"}]}, f, protocol=4)
with open("not_snapshot.pickle", "wb") as f:
    pickle.dump({"hello": 1}, f, protocol=4)
