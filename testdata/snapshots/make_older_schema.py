"""Write older_schema.pickle.gz: leak_module_cache.pickle.gz (a real torch 2.11 snapshot) cut down to
the fields older torch wrote, for the test that torchmem prints what is recorded and says "not
recorded" for the rest.

    python3 make_older_schema.py

Kept: segments with device, address, total_size, allocated_size, active_size, stream, segment_type;
blocks with address, size, state; device_traces empty (no history recorded). Dropped, as snapshots
of torch before 2.1 lack them: allocator_settings, external_annotations, requested_size,
segment_pool_id, is_expandable, frames. Pickle protocol 2, as Python 3.7-era torch wrote.
"""

import gzip
import pickle

with gzip.open("leak_module_cache.pickle.gz") as f:
    snap = pickle.load(f)
segments = []
for seg in snap["segments"]:
    s = {k: seg[k] for k in ("device", "address", "total_size", "allocated_size", "active_size", "stream", "segment_type")}
    s["blocks"] = [{"address": b["address"], "size": b["size"], "state": b["state"]} for b in seg["blocks"]]
    segments.append(s)
with gzip.GzipFile("older_schema.pickle.gz", "wb", mtime=0) as f:
    pickle.dump({"segments": segments, "device_traces": [[]]}, f, protocol=2)
