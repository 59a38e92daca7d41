"""Make a large allocator snapshot for measuring torchmem (never committed).

Tiles the allocation history (device_traces) of a real snapshot COPIES
times, each copy shifted in time after the previous one and to fresh
addresses, the way TestWriteTiledTrace tiles a Kineto trace. Every entry
gets its own frames list (sharing the frame dicts), as torch writes them.

    python3 testdata/snapshots/tile_snapshot.py \
        /work/shared/traces/frag_small_allocs/snapshot.pickle /tmp/big.pickle 75

(75 copies of the 7 MB frag_small_allocs snapshot make about 540 MB and
4.3 million trace entries.) Standard library only; protocol 4 like torch.
"""
import pickle
import sys


def main():
    src, out, copies = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(src, "rb") as f:
        snap = pickle.load(f)
    traces = snap["device_traces"]
    tiled = []
    for trace in traces:
        if not trace:
            tiled.append(trace)
            continue
        t0 = min(e["time_us"] for e in trace)
        span = max(e["time_us"] for e in trace) - t0 + 1000
        lo = min(e["addr"] for e in trace if e["addr"] > 0)
        hi = max(e["addr"] + max(e["size"], 0) for e in trace)
        stride = (hi - lo + (2 << 20)) & ~((2 << 20) - 1)
        entries = []
        for k in range(copies):
            for e in trace:
                c = dict(e)
                c["time_us"] = e["time_us"] + k * span
                if e["addr"] > 0 and e["action"] != "oom":
                    c["addr"] = e["addr"] + k * stride
                c["frames"] = list(e["frames"])
                entries.append(c)
        tiled.append(entries)
    snap["device_traces"] = tiled
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
