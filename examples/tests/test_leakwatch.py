"""LeakWatch measured: on every steps log in testdata (what was planted comes from each
recording's truth.json) and on a semi-synthetic corpus built from them (every real healthy steps
series is a background; leaks and healthy look-alikes are planted into it with fixed seeds).

    python3 -m unittest discover -s examples/tests -v      (go test ./examples runs it)
    python3 examples/tests/test_leakwatch.py -v            prints the delay table too

The corpus (the issue #38 design, also followed by torchmem's Go corpus):
  backgrounds  every distinct healthy real series (requested bytes where the log has them, else
               allocated), mirrored to the length a case needs (v, v reversed, v, ...: no seam),
               as recorded and with noise added (Gaussian, and whole MiB in -2..2 like the
               allocator's rounding and a step's temporaries): most real series are exactly flat
               in requested bytes, so without the added noise the corpus would test no noise.
  sizes        per-step leak 0.5x to 50x the background's step noise (noise_sigma: 1.4826 x the
               MAD of its step-to-step changes).
  leaks        constant from an early step; late start (after 15-30 steps of background);
               staircase of period 2-25 (per step size x period at every jump, >= 3 jumps);
               accelerating (the step k of the leak keeps (1 + k/3) x the size).
  look-alikes  warm-up ramps (halving rises over 2-8 steps), bounded buffers that fill for 3-30
               steps then stay, spikes that fall back (one step, a few steps, every p steps).
The delay is the alarm's step minus the first step the leak raised.
"""

import copy
import glob
import json
import math
import os
import random
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TESTDATA = os.path.join(ROOT, "testdata")
sys.path.insert(0, os.path.join(ROOT, "examples"))

import torchmem_profile as tp  # noqa: E402
from torchmem_profile import GROWTH_MIN_STEPS, LeakWatch, noise_sigma  # noqa: E402

MiB = 1 << 20
REQUESTED = "requested_bytes.all.current"

# The targets (issue #38): for leaks of at least twice the step noise, the delay from the leak's
# first step to the alarm: median <= 10 steps, 95th percentile <= 14.
MEDIAN_DELAY, P95_DELAY = 10, 14
# A staircase cannot be told before its third jump (2 periods after the first): it must alarm
# within this many steps of it (or within P95_DELAY of its start, when that is later).
STAIRCASE_AFTER_THIRD = 1
# Longest fill (steps of regular rises) of a healthy buffer that never alarms; longer fills
# cannot be told from a leak while they fill (the documented limit) and must get the all-clear.
SILENT_FILL = GROWTH_MIN_STEPS - 1


# ----- the real logs -------------------------------------------------------------------------


def steps_logs():
    """Every per-step log in testdata (the snippet's *.steps.jsonl and the recorders' *steps*.jsonl)."""
    found = glob.glob(os.path.join(TESTDATA, "**", "*steps*.jsonl"), recursive=True)
    return sorted(p for p in found if "fuzz" not in p)


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def find_truth(path):
    d, name = os.path.dirname(path), os.path.basename(path)
    for cand in (os.path.join(d, name.split(".")[0] + ".truth.json"), os.path.join(d, "truth.json"),
                 os.path.join(os.path.dirname(d), "truth.json")):
        if os.path.exists(cand):
            return cand
    return None


def log_rank(path, records):
    rank = records[0].get("rank")
    if rank is None:
        m = re.search(r"rank[_-]?(\d+)", os.path.relpath(path, TESTDATA))
        rank = m.group(1) if m else None
    return str(rank)


def planted_leak(path, records):
    """(leaks, bytes_per_step or None, first_leaking_step) from the recording's truth.json."""
    truth_path = find_truth(path)
    rel = os.path.relpath(path, TESTDATA)
    if truth_path is None:
        # The snippet's own mechanics runs (examples/record/snippet_checks.py, teardown_exits.py)
        # plant nothing and carry no truth.json; any other log must say what it holds.
        if re.match(r"gpu/snippet_(proof|v\d+)/", rel):
            return False, 0, 0
        raise AssertionError("%s: no truth.json says what was planted" % rel)
    with open(truth_path) as f:
        truth = json.load(f)
    if "leak" in truth:
        leak = truth["leak"]
        if not leak:
            return False, 0, 0
        n = leak.get("bytes_per_step")
        if isinstance(n, dict):  # per rank
            n = n.get(log_rank(path, records))
            if not n:
                return False, 0, 0
        return True, n, leak.get("first_leaking_step", 0)
    leaky = truth.get("leaky_ranks", [truth["leaky_rank"]] if "leaky_rank" in truth else None)
    if leaky is not None and log_rank(path, records) not in {str(r) for r in leaky}:
        return False, 0, 0  # a multi-rank run: this rank keeps nothing
    if "leak_bytes_per_step" in truth:
        n = truth["leak_bytes_per_step"]
        if isinstance(n, dict):
            run = os.path.basename(os.path.dirname(path))
            n = n.get(run, n.get(log_rank(path, records)))
        if n is None:
            raise AssertionError("%s: truth.json's leak_bytes_per_step names no entry for this log" % rel)
        return n > 0, n, 0
    if truth.get("leak_site"):
        return True, None, 0
    if "leak" in truth.get("expect", {}):
        return bool(truth["expect"]["leak"]), None, 0
    if str(truth.get("planted", "")).startswith("none"):
        return False, 0, 0
    raise AssertionError("%s: truth.json does not say whether the run leaks" % rel)


def fills_for(path):
    """How many steps a bounded buffer in a healthy run fills for, when its truth.json says."""
    truth_path = find_truth(path)
    if truth_path is None:
        return 0
    with open(truth_path) as f:
        return json.load(f).get("fills_for_steps", 0)


def watch(records):
    w = LeakWatch()
    alarms = [(r.get("step"), w.observe(r)) for r in records]
    return w, [(step, text) for step, text in alarms if text is not None]


def series_key(record):
    """The key LeakWatch reads from a log: requested bytes when the log has them."""
    for key in (REQUESTED,) + tp._ALLOCATED_KEYS:
        if key in record:
            return key
    raise KeyError(record)


def truth_of(path):
    truth_path = find_truth(path)
    if truth_path is None:
        return {}
    with open(truth_path) as f:
        return json.load(f)


class EveryStepsLogTest(unittest.TestCase):
    """Every steps log in testdata: no healthy run alarms (but the documented long fills, which
    get the all-clear); every leak the steps log can show at 2x its step noise or more alarms
    within P95_DELAY steps of its start (a staircase: by its third jump), with its figures."""

    def test_every_log(self):
        logs = steps_logs()
        self.assertGreaterEqual(len(logs), 40, "fewer steps logs than testdata holds")
        checked = healthy = 0
        limits = []  # leaks LeakWatch cannot be asked to see, and why
        for path in logs:
            rel = os.path.relpath(path, TESTDATA)
            with self.subTest(log=rel):
                records = read_log(path)
                leaks, per_step, first = planted_leak(path, records)
                w, alarms = watch(records)
                self.assertLessEqual(len(alarms), 1, "alarmed more than once")
                if not leaks:
                    if fills_for(path) > SILENT_FILL:
                        # The documented limit: a buffer that fills regularly for longer than
                        # the alarm's delay shows, while it fills, what a leak shows. It alarms,
                        # then says the growth stopped (a measured plateau).
                        self.assertEqual(len(alarms), 1)
                        self.assertIsNotNone(w.stopped(), "no all-clear after the buffer filled")
                        continue
                    healthy += 1
                    self.assertEqual(alarms, [], "a healthy run alarmed")
                    continue
                leak = truth_of(path).get("leak") or {}
                period = leak.get("period", 1) if isinstance(leak, dict) else 1
                key = series_key(records[0])
                values = [r[key] for r in records if key in r]
                noise = noise_sigma(values[: max(first, 1) + 1] if first > 8 else values)
                if alarms:
                    # Whatever it says must be true: not before the leak (one step of slack:
                    # the noise may rise into the step before), not twice.
                    self.assertGreaterEqual(w.since_step, first - 1, "the leak is said to start before it did")
                    self.assertGreaterEqual(alarms[0][0], first)
                if isinstance(leak, dict) and leak.get("device") == "host":
                    limits.append((rel, "host memory: not in the GPU's steps log"))
                    continue
                if records[-1]["step"] < first + GROWTH_MIN_STEPS - 1 and not alarms:
                    limits.append((rel, "the log ends before the leak's 9th step"))
                    continue
                if per_step and per_step < 2 * noise:
                    limits.append((rel, "%.2fx the step noise" % (per_step / noise)))
                    continue
                checked += 1
                self.assertTrue(alarms, "a leaking run (from step %d) never alarmed in %d steps" % (first, len(records)))
                step, text = alarms[0]
                self.assertLessEqual(step, first + max(2 * period + STAIRCASE_AFTER_THIRD, P95_DELAY), text)
                self.assertIn("LEAK", text)
                if per_step:
                    self.assertLess(abs(w.bytes_per_step - per_step), 0.1 * per_step + 512, text)
        self.assertGreaterEqual(healthy, 80, "too few healthy logs checked: is truth.json read?")
        self.assertGreaterEqual(checked, 30, "too few leaking runs checked: is truth.json read?")
        # The limits are the ones the docstring names (below 2x the noise, host memory), few.
        self.assertLessEqual(len([l for l in limits if "9th step" not in l[1]]), 4, limits)
        if "-v" in sys.argv or os.environ.get("LEAKWATCH_TABLE"):
            sys.stderr.write("\nreal logs: %d healthy, %d leaks checked; not asked of LeakWatch:\n%s\n" % (
                healthy, checked, "\n".join("  %s: %s" % l for l in limits)))


# ----- the semi-synthetic corpus -------------------------------------------------------------


def healthy_backgrounds():
    """(name, values) of every distinct healthy real series (a buffer filling longer than
    SILENT_FILL is not a background: it is the limit itself)."""
    seen, out = set(), []
    for path in steps_logs():
        records = read_log(path)
        leaks, _, _ = planted_leak(path, records)
        if leaks or fills_for(path) > SILENT_FILL or len(records) < 6:
            continue
        key = series_key(records[0])
        # From step 1: step 0 ends before the first optimizer step (its state, allocated once,
        # would recur as a rise at every mirror of a short log).
        values = [int(r[key]) for r in records if key in r][1:]
        shape = tuple(b - a for a, b in zip(values, values[1:]))
        if not any(shape):
            shape = ("flat",)  # flat logs differ only in length and level: one is enough
        if shape in seen:
            continue
        seen.add(shape)
        out.append((os.path.relpath(path, TESTDATA), values))
    return out


def mirrored(values, n):
    """values extended to n by mirroring (v, v reversed, v, ...): no seam, the same changes."""
    out, forward = list(values), False
    while len(out) < n:
        more = values if forward else values[::-1]
        out.extend(more[1:])
        forward = not forward
    return out[:n]


NOISES = {
    "as recorded": None,
    "gaussian 256 KiB": lambda rng: rng.gauss(0, 256 * 1024),
    "allocator 1 MiB x -2..2": lambda rng: MiB * rng.randint(-2, 2),
}
SIZES = (0.5, 1, 2, 3, 5, 10, 20, 50)


def leak_cases(rng):
    """(class, start, period, extra(k)): the bytes the leak holds at step k of it (k >= 0 from
    the first step it raised), in units of the per-step size; the period for staircases."""
    for _ in range(2):
        yield "constant", rng.randint(1, 6), 1, lambda k: k + 1
        yield "late start", rng.randint(15, 30), 1, lambda k: k + 1
        yield "accelerating", rng.randint(1, 10), 1, lambda k: sum(1 + j / 3.0 for j in range(k + 1))
    for p in range(2, 26):
        yield "staircase", rng.randint(1, 10), p, (lambda p: lambda k: p * (k // p + 1))(p)


def lookalike_cases(rng):
    """(class, detail, extra(i), fill length): healthy shapes in units of the size."""
    for w in range(2, 9):
        a = 4.0 * rng.uniform(1, 3)
        yield "warm-up ramp", w, (lambda w, a: lambda i: sum(a * 0.5 ** j for j in range(min(i, w))))(w, a), 0
    for f in range(3, 31):
        start = rng.randint(0, 10)
        yield "fill", f, (lambda f, s: lambda i: min(max(0, i - s), f))(f, start), f
    for p in range(2, 11):
        yield "spike every p", p, (lambda p: lambda i: 10.0 if i % p == p - 1 else 0.0)(p), 0
    for width in range(1, 6):
        at = rng.randint(5, 30)
        yield "spike, falls back", width, (lambda a, wd: lambda i: 20.0 if a <= i < a + wd else 0.0)(at, width), 0


def run(values, to_end=False, watch=None, first=0):
    """LeakWatch over one series: (first alarm step or None, the watch); to_end: on to the end
    after the alarm (to see the all-clear); watch: a watch that already read values[:first]."""
    w, alarm = watch or LeakWatch(), None
    for i in range(first, len(values)):
        if w.observe({"step": i, REQUESTED: int(values[i])}) is not None:
            alarm = i
            if not to_end:
                break
    return alarm, w


def fork(w):
    """A copy of a watch that has not alarmed: it goes on as the original would."""
    c = copy.copy(w)
    c._steps, c._values = list(w._steps), list(w._values)
    return c


def run_alone(base, first):
    """LeakWatch over the background alone: (first alarm step or None, the watch as it was
    after reading base[:first]). Every case planted into it is base up to first: its runs start
    from that watch rather than read the same steps again (the same alarms; 11% fewer steps read)."""
    w, at, alarm = LeakWatch(), None, None
    for i, v in enumerate(base):
        if i == first:
            at = fork(w)
        if w.observe({"step": i, REQUESTED: int(v)}) is not None:
            alarm = i
            break
    return alarm, at if at is not None else fork(w)


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(math.ceil(q * len(xs))) - 1)]


def build_corpus(seed=38):
    """Runs LeakWatch on every case: (leak rows, look-alike rows, backgrounds, skipped). A case
    whose background alone (noise added) alarms is skipped and counted: what is planted there
    cannot be told apart from what the background does."""
    rng = random.Random(seed)
    backgrounds = healthy_backgrounds()
    leaks, looks, skipped = [], [], []

    def background(bg, noise, n, first):
        base = mirrored(bg, n)
        if noise is not None:
            base = [v + noise(rng) for v in base]
        sigma = noise_sigma(base)
        alone, at = run_alone(base, first)
        # Structured: the recorded series moves far beyond the step noise (a cache that fills
        # irregularly, a queue that fills for 8 steps, gradient accumulation, a long spike): the
        # step noise (a median) does not see those moves, so sizes relative to it say little
        # there. Reported apart; the targets hold on the others (noise backgrounds).
        swing = max(abs(b - a) for a, b in zip(bg, bg[1:]))
        return base, sigma, "structured" if swing > 10 * sigma else "noise", alone, at

    for name, bg in backgrounds:
        for noise_name, noise in NOISES.items():
            for cls, start, p, extra in leak_cases(rng):
                base, sigma, kind, alone, at = background(bg, noise, start + max(30, 2 * p + 15), start)
                if alone is not None:
                    skipped.append((name, noise_name, cls))
                    continue
                for m in SIZES:
                    size = m * sigma
                    values = [v + (size * extra(i - start) if i >= start else 0) for i, v in enumerate(base)]
                    alarm, w = run(values, watch=fork(at), first=start)
                    leaks.append({
                        "bg": name, "noise": noise_name, "bgkind": kind, "class": cls, "period": p,
                        "size": m, "start": start, "alarm": alarm, "bytes_per_step": size,
                        "found": w.bytes_per_step, "since": w.since_step,
                    })
            for cls, detail, extra, fill in lookalike_cases(rng):
                first = next((i for i in range(60) if extra(i)), 60)  # the first step it moves
                base, sigma, kind, alone, at = background(bg, noise, 60, first)
                if alone is not None:
                    skipped.append((name, noise_name, cls))
                    continue
                for m in (2, 10, 50):
                    values = [v + m * sigma * extra(i) for i, v in enumerate(base)]
                    alarm, w = run(values, to_end=True, watch=fork(at), first=first)
                    looks.append({
                        "bg": name, "noise": noise_name, "bgkind": kind, "class": cls,
                        "exact": sigma <= tp.SIGMA_FLOOR,
                        "detail": detail, "size": m, "fill": fill, "alarm": alarm,
                        "stopped": w.stopped(),
                    })
    return leaks, looks, backgrounds, skipped


def delay(row):
    """Steps from the leak's first step to the alarm, or None."""
    return None if row["alarm"] is None else row["alarm"] - row["start"]


def staircase_due(row):
    """The step a staircase must have alarmed by: its third jump (one step of slack), or the
    every-step leaks' p95 when that is later (small periods)."""
    return row["start"] + max(2 * row["period"] + STAIRCASE_AFTER_THIRD, P95_DELAY)


def table(leaks, looks):
    lines = ["%-13s %-7s %5s %7s %6s %4s %4s %s" % (
        "class", "size", "cases", "recall", "median", "p95", "max", "(delay: alarm step - the leak's first step)")]
    bands = (("0.5-1x", lambda m: m < 2), (">=2x", lambda m: m >= 2))
    for cls in ("constant", "late start", "accelerating", "staircase"):
        for band, inband in bands:
            rows = [r for r in leaks if r["class"] == cls and inband(r["size"])]
            ds = [delay(r) for r in rows if r["alarm"] is not None]
            extra = ""
            if cls == "staircase":
                after = [delay(r) - 2 * r["period"] for r in rows if r["alarm"] is not None]
                extra = "after the third jump: median %s, p95 %s" % (percentile(after, 0.5), percentile(after, 0.95))
            lines.append("%-13s %-7s %5d %6.1f%% %6s %4s %4s %s" % (
                cls, band, len(rows), 100.0 * len(ds) / max(1, len(rows)),
                percentile(ds, 0.5), percentile(ds, 0.95), max(ds) if ds else "-", extra))
    every = [delay(r) for r in leaks if r["class"] != "staircase" and r["size"] >= 2 and r["alarm"] is not None]
    lines.append("every-step leaks >= 2x: median %s, p95 %s (targets %d, %d)" % (
        percentile(every, 0.5), percentile(every, 0.95), MEDIAN_DELAY, P95_DELAY))
    lines.append("%-18s %-6s %5s %6s %s" % ("look-alike", "detail", "cases", "alarms", "all-clear after the alarm"))
    groups = {}
    for r in looks:
        detail = "-"
        if r["class"] == "fill":
            detail = "%d-%d" % ((3, SILENT_FILL) if r["detail"] <= SILENT_FILL else (SILENT_FILL + 1, 30))
        groups.setdefault((r["class"], detail), []).append(r)
    for (cls, detail), rows in sorted(groups.items()):
        alarmed = [r for r in rows if r["alarm"] is not None]
        lines.append("%-18s %-6s %5d %6d %s" % (
            cls, detail, len(rows), len(alarmed),
            "%d of %d" % (sum(1 for r in alarmed if r["stopped"] is not None), len(alarmed)) if alarmed else "-"))
    return "\n".join(lines)


def report(leaks, looks, skipped):
    out = []
    for kind in ("noise", "structured"):
        out.append("== LeakWatch on the semi-synthetic corpus, %s backgrounds ==" % kind)
        out.append(table([r for r in leaks if r["bgkind"] == kind], [r for r in looks if r["bgkind"] == kind]))
    out.append("skipped (the background alone, noise added, alarmed): %d cases" % len(skipped))
    return "\n".join(out)


_CORPUS = None


def corpus():
    global _CORPUS
    if _CORPUS is None:
        _CORPUS = build_corpus()
    return _CORPUS


class CorpusTest(unittest.TestCase):
    """The figures LeakWatch's docstring states, measured (the targets hold on noise
    backgrounds; structured ones are reported)."""

    @classmethod
    def setUpClass(cls):
        cls.leaks, cls.looks, cls.backgrounds, cls.skipped = corpus()
        if "-v" in sys.argv or os.environ.get("LEAKWATCH_TABLE"):
            sys.stderr.write("\n" + report(cls.leaks, cls.looks, cls.skipped) + "\n")

    def noise(self, rows):
        return [r for r in rows if r["bgkind"] == "noise"]

    def test_size(self):
        self.assertGreaterEqual(len(self.backgrounds), 5)
        self.assertGreaterEqual(len(self.noise(self.leaks)), 2000)
        self.assertGreaterEqual(len(self.looks), 1000)
        self.assertLessEqual(len(self.skipped), 0.02 * (len(self.leaks) + len(self.looks)))

    def test_every_step_leaks_alarm_within_the_delay(self):
        rows = [r for r in self.noise(self.leaks) if r["class"] != "staircase" and r["size"] >= 2]
        missed = [r for r in rows if r["alarm"] is None]
        self.assertLessEqual(len(missed), 0.01 * len(rows), missed[:5])
        ds = [delay(r) for r in rows if r["alarm"] is not None]
        self.assertLessEqual(percentile(ds, 0.5), MEDIAN_DELAY)
        self.assertLessEqual(percentile(ds, 0.95), P95_DELAY)
        early = [r for r in self.leaks if r["alarm"] is not None and r["alarm"] < r["start"]]
        self.assertEqual(early, [], "alarmed before the leak started")

    def test_staircases_alarm_by_the_third_jump(self):
        rows = [r for r in self.noise(self.leaks) if r["class"] == "staircase" and r["size"] >= 2]
        missed = [r for r in rows if r["alarm"] is None]
        self.assertLessEqual(len(missed), 0.01 * len(rows), missed[:5])
        late = [r for r in rows if r["alarm"] is not None and r["alarm"] > staircase_due(r)]
        self.assertLessEqual(len(late), 0.02 * len(rows), late[:5])

    def test_bytes_per_step(self):
        rows = [r for r in self.noise(self.leaks) if r["alarm"] is not None and r["size"] >= 2 and r["class"] != "accelerating"]
        near = [r for r in rows if abs(r["found"] - r["bytes_per_step"]) <= 0.1 * r["bytes_per_step"]]
        self.assertGreaterEqual(len(near), 0.9 * len(rows))

    def test_lookalikes_stay_silent(self):
        # Warm-up ramps and spikes that fall back, on every background: at most 0.5% alarm.
        rows = [r for r in self.looks if r["class"] != "fill"]
        alarmed = [r for r in rows if r["alarm"] is not None]
        self.assertLessEqual(len(alarmed), 0.005 * len(rows), alarmed[:5])

    def test_short_fills(self):
        # A buffer that fills for SILENT_FILL steps or fewer: silent on every background without
        # noise (exact bytes: most real logs in requested bytes). With noise, a step of the noise
        # (or the background's own filling: watch/queue9 fills for 8 steps, watch/healthy's
        # cache) that rises after the fill makes it a longer fill at times: measured, bounded.
        rows = [r for r in self.looks if r["class"] == "fill" and r["fill"] <= SILENT_FILL]
        exact = [r for r in rows if r["exact"] and r["alarm"] is not None]
        self.assertEqual(exact, [])
        alarmed = [r for r in rows if r["alarm"] is not None]
        self.assertLessEqual(len(alarmed), 0.12 * len(rows))

    def test_long_fills_alarm_then_say_they_stopped(self):
        rows = [r for r in self.noise(self.looks) if r["class"] == "fill" and r["fill"] > SILENT_FILL]
        alarmed = [r for r in rows if r["alarm"] is not None]
        self.assertGreaterEqual(len(alarmed), 0.95 * len(rows))
        cleared = [r for r in alarmed if r["stopped"] is not None]
        self.assertGreaterEqual(len(cleared), 0.98 * len(alarmed))


class FiguresTest(unittest.TestCase):
    def test_write_figures(self):
        # For Go's comparison with memtimeline/growth (examples/leakwatch_model_test.go).
        path = os.environ.get("LEAKWATCH_FIGURES")
        if not path:
            self.skipTest("LEAKWATCH_FIGURES not set")
        import figures

        with open(path, "w") as f:
            figures.main(f)
        with open(path) as f:
            self.assertGreater(sum(1 for _ in f), 150)


class RuleTest(unittest.TestCase):
    def series(self, values, start=0, key=REQUESTED):
        return [{"step": start + i, key: v} for i, v in enumerate(values)]

    def test_message_and_figures(self):
        w, alarms = watch(self.series([200 * MiB + 4 * MiB * max(0, i - 3) for i in range(20)]))
        step, text = alarms[0]
        self.assertEqual((w.since_step, step, w.bytes_per_step, w.kind), (4, 12, 4 * MiB, "steady"))
        self.assertEqual(text, "LEAK: requested memory grew 4.00 MB per step over 9 steps (steps 4-12, 236.00 MB now)")

    def test_reads_requested_bytes_else_allocated(self):
        # requested bytes rise by exactly 4 MiB, allocated by 2-6 MiB (the allocator's rounding
        # and the step's temporaries): the figure comes from requested.
        recs = []
        for i in range(20):
            k = max(0, i - 3)
            recs.append({"step": i, REQUESTED: 100 * MiB + 4 * MiB * k,
                         "allocated_bytes.all.current": 128 * MiB + 4 * MiB * k + (2 * MiB if i % 3 == 0 else 0)})
        w, alarms = watch(recs)
        self.assertEqual((w.key, w.bytes_per_step), (REQUESTED, 4 * MiB))
        for r in recs:
            del r[REQUESTED]
        w, alarms = watch(recs)
        self.assertEqual(w.key, "allocated_bytes.all.current")
        self.assertIn("allocated memory grew", alarms[0][1])

    def test_staircase_of_any_period(self):
        # 8 MiB kept every p steps from step 5, flat between: the alarm at the third jump.
        for p in (2, 5, 10, 25):
            values = [300 * MiB + 8 * MiB * (1 + (i - 5) // p if i >= 5 else 0) for i in range(5 + 2 * p + 10)]
            with self.subTest(period=p):
                w, alarms = watch(self.series(values))
                self.assertEqual([s for s, _ in alarms], [5 + 2 * p])
                self.assertEqual((w.kind, w.period, w.bytes_per_period, w.since_step), ("staircase", p, 8 * MiB, 5))
                self.assertIn("8.00 MB every %d steps" % p, alarms[0][1])
        # The same evaluation freeing what it made: spikes, no leak.
        _, alarms = watch(self.series([300 * MiB + (64 * MiB if i % 5 == 4 else 0) for i in range(60)]))
        self.assertEqual(alarms, [])

    def test_queue9_and_a_ninth_rise(self):
        # deque(maxlen=9) of 4 MiB: 8 rises, then flat: silent; one more rise alarms.
        _, alarms = watch(self.series([4 * MiB * min(i, 8) for i in range(30)]))
        self.assertEqual(alarms, [])
        w, alarms = watch(self.series([4 * MiB * min(i, 9) for i in range(30)]))
        self.assertEqual([s for s, _ in alarms], [9])
        self.assertEqual((w.stopped(), w.flat_steps), (9, 10))  # the all-clear: a measured plateau

    def test_irregular_rises_and_warm_up_do_not_alarm(self):
        # A cache keyed by a random length (watch/healthy, the H200 run): rises at irregular
        # steps by irregular amounts; a warm-up that settles.
        rises = [7.5, 4.5, 6.25, 4, 0, 2.5, 0, 3, 1.75, 1.25, 0, 0, 1, 0, 0, 0, 0, 0.75, 2.75, 0, 0, 0, 0, 0, 0, 0, 3.75, 0, 0]
        values = [100 * MiB]
        for r in rises:
            values.append(values[-1] + int(r * MiB))
        _, alarms = watch(self.series(values))
        self.assertEqual(alarms, [])
        warm = [100 * MiB + int(64 * MiB * (1 - 0.5 ** min(i, 12))) for i in range(40)]
        _, alarms = watch(self.series(warm))
        self.assertEqual(alarms, [])

    def test_a_gap_or_restart_in_steps_restarts(self):
        recs = self.series([100 + 10 * i for i in range(6)]) + self.series([200 + 10 * i for i in range(6)], start=10)
        _, alarms = watch(recs)
        self.assertEqual(alarms, [])

    def test_records_without_bytes_are_skipped(self):
        w = LeakWatch()
        self.assertIsNone(w.observe({"step": 0}))
        self.assertIsNone(w.observe({"allocated": 5}))
        self.assertIsNone(w.observe({"step": True, "allocated": 5}))
        # A user's log written by json.dumps may hold NaN or Infinity: skipped, never raised.
        for bad in json.loads("[NaN, Infinity, -Infinity]"):
            self.assertIsNone(w.observe({"step": 1, "allocated": bad}))


if __name__ == "__main__":
    unittest.main()
