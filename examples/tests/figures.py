"""The figures of LeakWatch's growth model on every steps log in testdata and on leaks planted
into its healthy series, one JSON object per line, for examples/python_test.go's
TestPythonSnippet/LeakWatchMatchesGoModel: Go computes the same figures (memtimeline/growth) on the same
values and compares, so the two cannot drift apart.

Each line: the series (its last LEAK_WATCH_WINDOW values, the window LeakWatch reads), the
noise, the Theil-Sen slope and the Mann-Kendall S and Z of it; "alarm": the window LeakWatch
held when it alarmed on the series, with the kind and period and the values of the next period
steps when the series has them, or null.

    python3 examples/tests/figures.py        (not a unittest module: discover skips it)

test_leakwatch.py writes them to $LEAKWATCH_FIGURES when set (go test's TestPythonSnippet:
one Python process, torch imported once).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_leakwatch as t  # noqa: E402
from torchmem_profile import LEAK_WATCH_WINDOW, LeakWatch, mann_kendall, noise_sigma, theil_sen  # noqa: E402


def alarm_window(values):
    w = LeakWatch()
    for i, v in enumerate(values):
        if w.observe({"step": i, t.REQUESTED: int(v)}) is not None:
            return {"values": list(w._values), "kind": w.kind, "period": w.period,
                    "next": [int(x) for x in values[i + 1:i + 1 + w.period]]}
    return None


def line(name, values):
    win = [int(v) for v in values[-LEAK_WATCH_WINDOW:]]
    s, z = mann_kendall(win)
    return {"name": name, "values": win, "sigma": noise_sigma(win), "slope": theil_sen(win)[0],
            "s": s, "z": z, "alarm": alarm_window(values)}


def main(out=sys.stdout):
    for path in t.steps_logs():
        records = t.read_log(path)
        if not records:
            continue
        key = t.series_key(records[0])
        values = [int(r[key]) for r in records if isinstance(r.get(key), (int, float))]
        if len(values) >= 3:
            out.write(json.dumps(line(os.path.relpath(path, t.TESTDATA), values)) + "\n")
    # Leaks planted into every distinct healthy series (as recorded, mirrored to 60 steps):
    # every step at 2x and 10x the noise from step 10, a staircase of period 5 at 3x.
    for name, bg in t.healthy_backgrounds():
        base = t.mirrored(bg, 60)
        sigma = noise_sigma(base)
        for label, extra in (("2x", lambda k: 2 * (k + 1)), ("10x", lambda k: 10 * (k + 1)),
                             ("stairs5 3x", lambda k: 15 * (k // 5 + 1))):
            values = [v + (sigma * extra(i - 10) if i >= 10 else 0) for i, v in enumerate(base)]
            out.write(json.dumps(line("%s + %s" % (name, label), [int(v) for v in values])) + "\n")


if __name__ == "__main__":
    main()
