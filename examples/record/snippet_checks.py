"""Device checks of the snippet's own machinery, printed as JSON lines (snippet v2, issue 17).

    python3 snippet_checks.py stats            # _read_memory_stats agrees with memory_stats()
    python3 snippet_checks.py snapshot FILE    # what a .snapshot.pickle.gz holds (frames, entries)
"""

import gzip
import json
import sys

import torch

from snippet_common import TorchMemProfile  # noqa: F401  (puts examples/ on sys.path)
import torchmem_profile


def check_stats():
    x = [torch.empty(n, device="cuda") for n in (1, 1000, 1 << 20)]
    mine = torchmem_profile._read_memory_stats(torch.cuda.current_device())
    theirs = torch.cuda.memory_stats()
    diff = {k: (mine[k], theirs.get(k)) for k in mine if mine[k] != int(theirs.get(k, 0))}
    print(json.dumps({"check": "stats", "ok": not diff, "diff": diff, "keys": len(mine), "live": len(x)}))


def check_snapshot(path):
    with gzip.open(path, "rb") as f:
        import pickle

        snap = pickle.load(f)
    traces = snap.get("device_traces", [[]])
    entries = sum(len(t) for t in traces)
    frames = [fr for t in traces for e in t for fr in (e.get("frames") or [])]
    cpp = sum(1 for fr in frames if not str(fr.get("filename", "")).endswith(".py"))
    print(json.dumps({"check": "snapshot", "path": path, "segments": len(snap.get("segments", [])),
                      "entries": entries, "frames": len(frames), "non_python_frames": cpp,
                      "actions": sorted({e.get("action") for t in traces for e in t})}))


if __name__ == "__main__":
    if sys.argv[1] == "stats":
        check_stats()
    else:
        check_snapshot(sys.argv[2])
