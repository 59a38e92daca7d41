"""The snippet on a machine without a GPU (CI: Debian's python3-torch 1.13, CPU only).

Run by `go test ./examples` (examples/python_test.go), or directly:
    python3 -m unittest discover -s examples/tests -v
"""

import gzip
import importlib
import io
import json
import logging
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest
import warnings
import zlib
from contextlib import redirect_stderr
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.dirname(HERE)
RECORD = os.path.join(EXAMPLES, "record")
sys.path.insert(0, EXAMPLES)

import torch  # noqa: E402

import torchmem_profile as tp  # noqa: E402

MiB = 1 << 20


class FakeGPU:
    """Stands in for the CUDA calls TorchMemProfile makes, so that step() runs its watchdog on
    a CPU: memory_stats() answers from a script of allocated/reserved bytes per step."""

    def __init__(self, allocated, reserved=None, capacity=64 << 30, fraction=1.0):
        self.allocated, self.reserved = allocated, reserved
        self.capacity, self.fraction = capacity, fraction
        self.calls = 0
        self.history = []  # _record_memory_history calls

    def stats(self, device):
        i = min(self.calls, len(self.allocated) - 1)
        self.calls += 1
        out = {k: 0 for k in tp.STEP_STAT_KEYS}
        out["allocated_bytes.all.current"] = self.allocated[i]
        # LeakWatch reads requested bytes (no allocator rounding); the script gives both.
        out["requested_bytes.all.current"] = self.allocated[i]
        out["allocated_bytes.all.peak"] = max(self.allocated[: i + 1])
        res = self.reserved[i] if self.reserved else self.allocated[i]
        out["reserved_bytes.all.current"] = res
        out["reserved_bytes.all.peak"] = max((self.reserved or self.allocated)[: i + 1])
        return out

    def record(self, *args, **kwargs):
        self.history.append(kwargs.get("enabled", True if not args else args[0]))

    def patches(self):
        props = mock.Mock(total_memory=self.capacity)
        snapshot = {
            "segments": [
                {"blocks": [{"state": "active_allocated", "size": 3 * MiB,
                             "frames": [{"filename": "/usr/lib/python3/dist-packages/torch/nn/x.py", "line": 1},
                                        {"filename": "/home/u/train.py", "line": 42}]}]}
            ],
            "device_traces": [[]],
        }
        return [
            mock.patch.object(torch.cuda, "is_available", return_value=True),
            mock.patch.object(torch.cuda, "current_device", return_value=0),
            mock.patch.object(torch.cuda, "get_device_properties", return_value=props),
            mock.patch.object(torch.cuda.memory, "_snapshot", return_value=snapshot, create=True),
            mock.patch.object(torch.cuda.memory, "_record_memory_history", side_effect=self.record, create=True),
            # fraction None: a torch without the getter (before 2.6)
            mock.patch.object(torch.cuda.memory, "get_per_process_memory_fraction", create=True,
                              **({"new": None} if self.fraction is None else {"return_value": self.fraction})),
            mock.patch.object(tp, "_read_memory_stats", side_effect=self.stats),
        ]


def run_fake(allocated, steps, env=None, reserved=None, fraction=1.0, capacity=64 << 30, **kwargs):
    """TorchMemProfile(trace=False) over `steps` steps on a FakeGPU; returns (tm, stderr)."""
    gpu = FakeGPU(allocated, reserved, capacity=capacity, fraction=fraction)
    out = tempfile.mkdtemp(prefix="torchmem_test_")
    env = dict(env or {})
    err = io.StringIO()
    with mock.patch.dict(os.environ, env):
        patches = gpu.patches()
        for p in patches:
            p.start()
        try:
            with redirect_stderr(err), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with tp.TorchMemProfile(out_dir=out, trace=False, **kwargs) as tm:
                    for _ in range(steps):
                        tm.step()
        finally:
            for p in reversed(patches):
                p.stop()
    tm.fake = gpu
    return tm, err.getvalue()


def indexed_members(path):
    """The inflated sizes of an indexed gzip file's members and the total its last one names,
    checking that every member names its compressed size exactly and carries its CRC."""
    data = open(path, "rb").read()
    sizes, total, i = [], None, 0
    while i < len(data):
        if data[i : i + 4] != b"\x1f\x8b\x08\x04":
            raise AssertionError("member at %d: not a gzip member with an extra field" % i)
        (xlen,) = struct.unpack_from("<H", data, i + 10)
        extra, body_at = data[i + 12 : i + 12 + xlen], i + 12 + xlen
        fields = {}
        while extra:
            sid, n = struct.unpack_from("<2sH", extra)
            fields[sid], extra = extra[4 : 4 + n], extra[4 + n :]
        (size,) = struct.unpack("<I", fields[b"MZ"])
        body = data[body_at : body_at + size]
        crc, isize = struct.unpack_from("<II", data, body_at + size)
        raw = zlib.decompress(body, -zlib.MAX_WBITS)
        if zlib.crc32(raw) & 0xFFFFFFFF != crc or len(raw) != isize:
            raise AssertionError("member at %d: its trailer does not match its data" % i)
        if b"TS" in fields:
            (total,) = struct.unpack("<Q", fields[b"TS"])
        else:
            sizes.append(isize)
        i = body_at + size + 8
    return sizes, total


def leaking(n, start, per_step, base=200 * MiB):
    return [base + max(0, i - start + 1) * per_step for i in range(n)]


class ImportTest(unittest.TestCase):
    def test_imports_without_frameworks(self):
        # Importing the snippet needs torch only: the callbacks import their framework lazily.
        code = (
            "import sys; sys.path.insert(0, %r)\n"
            "import torchmem_profile\n"
            "assert 'transformers' not in sys.modules and 'lightning' not in sys.modules\n"
            "assert 'pytorch_lightning' not in sys.modules\n"
            "print('ok')\n" % EXAMPLES
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.stdout.strip(), "ok", out.stderr)

    def test_callbacks_import_their_framework_when_asked(self):
        # No transformers here: asking for the callback names what is missing.
        code = (
            "import sys; sys.path.insert(0, %r)\n"
            "import builtins\n"
            "real = builtins.__import__\n"
            "def fake(name, *a, **k):\n"
            "    if name.split('.')[0] in ('transformers', 'lightning', 'pytorch_lightning'):\n"
            "        raise ModuleNotFoundError('No module named %%r' %% name, name=name)\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = fake\n"
            "import torchmem_profile\n"
            "for name in ('TorchMemCallback', 'TorchMemLightningCallback'):\n"
            "    try:\n"
            "        getattr(torchmem_profile, name)\n"
            "    except ModuleNotFoundError as e:\n"
            "        print(name, e.name.split('.')[0])\n" % EXAMPLES
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.stdout.split(), ["TorchMemCallback", "transformers", "TorchMemLightningCallback", "pytorch_lightning"], out.stderr)

    def test_without_torch_the_error_says_torch_is_needed(self):
        code = (
            "import sys; sys.path.insert(0, %r)\n"
            "sys.modules['torch'] = None\n"  # import torch raises ModuleNotFoundError
            "try:\n"
            "    import torchmem_profile\n"
            "except ModuleNotFoundError as e:\n"
            "    print(e.name); print(e)\n" % EXAMPLES
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[:1], ["torch"], out.stdout + out.stderr)
        self.assertIn("needs torch", out.stdout)


class CPUProfileTest(unittest.TestCase):
    def test_cpu_trace_no_snapshot_and_a_warning(self):
        out = tempfile.mkdtemp(prefix="torchmem_cpu_")
        with mock.patch.dict(os.environ, {"TORCHMEM_DIR": out}), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with tp.TorchMemProfile(active=2) as tm:
                for _ in range(5):
                    torch.randn(64, 64) @ torch.randn(64, 64)
                    tm.step()
        names = sorted(os.listdir(out))
        self.assertTrue(any("CUDA is not available" in str(w.message) for w in caught), [str(w.message) for w in caught])
        self.assertEqual(len(names), 1, names)
        self.assertRegex(names[0], r"_rank0_step4\.pt\.trace\.json\.gz$")
        self.assertFalse(any("snapshot" in n or n.endswith(".jsonl") for n in names))
        self.assertIsNone(tm.dump_snapshot())
        self.assertEqual(tm.alarms, [])
        # The trace is gzip in indexed members (see _IndexedGzip): one stream to gzip.open,
        # each member naming its compressed size, the last the total, as torchmem reads them.
        path = os.path.join(out, names[0])
        with gzip.open(path, "rb") as f:
            plain = f.read()
        json.loads(plain)  # the trace torch exported, whole
        sizes, total = indexed_members(path)
        self.assertEqual(total, len(plain))
        self.assertEqual(sum(sizes), len(plain))
        self.assertTrue(all(s <= tp._IndexedGzip.MEMBER for s in sizes), sizes)

    def test_disabled(self):
        out = tempfile.mkdtemp(prefix="torchmem_off_")
        with mock.patch.dict(os.environ, {"TORCHMEM": "0", "TORCHMEM_DIR": out}):
            with tp.TorchMemProfile() as tm:
                tm.step()
        self.assertEqual(os.listdir(out), [])


class WatchdogTest(unittest.TestCase):
    """step() feeds LeakWatch and checks near-OOM; alarms go to the log, on_alarm and
    TORCHMEM_NOTIFY (here on a FakeGPU: the same code paths as on a GPU, figures scripted)."""

    def test_leak_alarm_once_in_the_log_with_capture(self):
        seen = []
        tm, err = run_fake(leaking(30, 10, 4 * MiB), 30, on_alarm=seen.append)
        lines = [l for l in err.splitlines() if "LEAK" in l]
        self.assertEqual(len(lines), 1, err)
        line = lines[0]
        self.assertIn("rank 0", line)
        self.assertIn("4.00 MB per step", line)
        self.assertIn("torchmem analyze " + tm.out_dir, line)
        self.assertIn(".leak.snapshot.pickle.gz", line)
        self.assertEqual(len(seen), 1)
        alarm = seen[0]
        self.assertEqual((alarm["kind"], alarm["rank"], alarm["bytes_per_step"]), ("leak", 0, 4 * MiB))
        self.assertGreaterEqual(alarm["since_step"], 10)
        self.assertLessEqual(alarm["step"], 10 + 9)  # by step 10 of the leak
        # The history started at the alarm and stopped after the capture; the file was written.
        leak_files = [p for p in tm.written if p.endswith(".leak.snapshot.pickle.gz")]
        self.assertEqual(alarm["files"], leak_files)
        self.assertTrue(os.path.exists(leak_files[0]))

    def test_leak_alarm_says_the_time_to_oom(self):
        # 4 MiB a step under a 64 GiB device: the headroom (capacity x fraction minus
        # reserved) over the rate; under a 0.5 fraction it is the process's limit.
        tm, err = run_fake(leaking(30, 10, 4 * MiB), 30)
        line = [l for l in err.splitlines() if "LEAK" in l][0]
        self.assertRegex(line, r"at 4\.00 MB/step, the 64\.00 GB device fills in ~16,000 steps")
        tm, err = run_fake(leaking(30, 10, 4 * MiB), 30, fraction=0.5)
        line = [l for l in err.splitlines() if "LEAK" in l][0]
        self.assertRegex(line, r"the process's 32\.00 GB limit fills in ~8,1\d\d steps")

    def test_the_steps_log_records_the_limit(self):
        tm, err = run_fake(leaking(12, 50, 4 * MiB), 12, fraction=0.25)
        path = [p for p in tm.written if p.endswith(".steps.jsonl")][0]
        with open(path) as f:
            first = json.loads(f.readline())
        self.assertEqual((first["total_memory"], first["memory_fraction"]), (64 << 30, 0.25))

    def test_a_periodic_leak_captures_two_periods_and_more(self):
        alloc = [300 * MiB + 8 * MiB * ((i + 1) // 5) for i in range(40)]  # 8 MiB at steps 4, 9, ...
        tm, err = run_fake(alloc, 40)
        alarm = tm.alarms[0]
        self.assertIn("8.00 MB every 5 steps (1.60 MB per step)", alarm["message"])
        self.assertIn("will capture the allocator history of the next 11 steps", alarm["message"])
        # Said when it is done: the 11 steps after the alarm's.
        m = re.search(r"captured the allocator history of steps (\d+)-(\d+) into", err)
        self.assertEqual((int(m.group(1)), int(m.group(2))), (alarm["step"] + 1, alarm["step"] + 11), err)
        self.assertEqual(tm.fake.history, [True, None, True, None])  # window, then the capture

    def test_healthy_runs_stay_quiet(self):
        base = 300 * MiB
        eval_spikes = [base + (64 * MiB if i % 5 == 4 else 0) for i in range(40)]
        queue_of_5 = [base + min(i, 4) * 4 * MiB for i in range(40)]  # deque(maxlen=5) filling
        for name, alloc in (("eval spikes", eval_spikes), ("bounded queue", queue_of_5)):
            seen = []
            tm, err = run_fake(alloc, 40, on_alarm=seen.append)
            self.assertEqual(seen, [], name)
            self.assertNotIn("LEAK", err, name)

    def test_a_buffer_that_fills_then_stops_is_said_to(self):
        alloc = [300 * MiB + 4 * MiB * min(i, 9) for i in range(30)]
        tm, err = run_fake(alloc, 30)
        self.assertEqual(err.count("LEAK"), 2, err)  # the alarm, then the all-clear naming it
        self.assertIn("stopped growing at step 9 and stayed flat for 10 steps", err)

    def test_the_alarm_says_what_will_be_captured_and_the_dump_what_was(self):
        # The reported bug: an alarm at the run's last step said it "captured the allocator
        # history of steps 45-48", steps that never ran. The alarm says what it will do; the
        # dump says which steps ran under the capture.
        alloc = leaking(19, 10, 4 * MiB)  # the alarm comes after step 18, the last one
        tm, err = run_fake(alloc, 19)
        alarm = tm.alarms[0]
        self.assertEqual(alarm["step"], 18, err)
        self.assertNotIn("captured", alarm["message"])
        self.assertIn("will capture the allocator history of the next 4 steps into", alarm["message"])
        self.assertIn("the run ended before a step ran after the LEAK alarm", err)
        self.assertNotRegex(err, r"steps? (19|2\d)\b")
        # Two steps after the alarm, then the block ends: those two are said, not four.
        tm, err = run_fake(leaking(21, 10, 4 * MiB), 21)
        self.assertEqual(tm.alarms[0]["step"], 18, err)
        self.assertIn("captured the allocator history of steps 19-20 into", err)

    def test_watch_off(self):
        tm, err = run_fake(leaking(30, 0, 4 * MiB), 30, env={"TORCHMEM_WATCH": "0"})
        self.assertEqual(tm.alarms, [])
        self.assertNotIn("LEAK", err)

    def test_on_leak_off_captures_nothing(self):
        tm, err = run_fake(leaking(30, 0, 4 * MiB), 30, env={"TORCHMEM_ON_LEAK": "off"})
        self.assertEqual([a["kind"] for a in tm.alarms], ["leak"])
        self.assertEqual(tm.alarms[0]["files"], [])
        self.assertFalse(any("leak.snapshot" in p for p in tm.written))

    def test_near_oom_once_with_holders_and_snapshot(self):
        # Capped at 1 GiB of a 64 GiB device; reserved climbs 100 MiB a step from 600 MiB.
        reserved = [600 * MiB + i * 100 * MiB for i in range(12)]
        allocated = [500 * MiB] * 12
        seen = []
        tm, err = run_fake(allocated, 12, reserved=reserved, fraction=1 / 64, on_alarm=seen.append)
        self.assertEqual([a["kind"] for a in seen], ["near_oom"])
        alarm = seen[0]
        self.assertEqual(alarm["limit"], 1 << 30)
        self.assertGreaterEqual(alarm["used"], 0.9 * (1 << 30))
        self.assertEqual(alarm["step"], 4)  # 1000 MiB >= 0.9 GiB (921.6 MiB) first at step 4
        self.assertIn("NEAR OOM", alarm["message"])
        self.assertIn("train.py:42 3.00 MB", alarm["message"])  # the top holder, outside torch
        self.assertIn("set_per_process_memory_fraction", alarm["message"])
        self.assertTrue(alarm["files"][0].endswith(".near_oom.snapshot.pickle.gz"))
        self.assertEqual(err.count("NEAR OOM"), 1)

    def test_near_oom_on_a_torch_that_cannot_report_its_fraction_says_so(self):
        # Before torch 2.6 there is no get_per_process_memory_fraction: the limit is the
        # device's capacity, and the message must not claim that no fraction was set.
        reserved = [600 * MiB + i * 100 * MiB for i in range(12)]
        for fraction, said in ((None, True), (1.0, False)):
            tm, _ = run_fake([500 * MiB] * 12, 12, reserved=reserved, fraction=fraction, capacity=1 << 30)
            self.assertEqual([(a["kind"], a["step"], a["limit"]) for a in tm.alarms], [("near_oom", 4, 1 << 30)])
            self.assertEqual("cannot report" in tm.alarms[0]["message"], said, tm.alarms[0]["message"])

    def test_near_oom_threshold_from_the_environment(self):
        reserved = [600 * MiB + i * 100 * MiB for i in range(12)]
        tm, _ = run_fake([500 * MiB] * 12, 12, reserved=reserved, fraction=1 / 64, env={"TORCHMEM_NEAR_OOM": "0.5"})
        self.assertEqual([(a["kind"], a["step"]) for a in tm.alarms], [("near_oom", 0)])

    def test_near_oom_given_as_a_percentage_warns_and_still_fires(self):
        reserved = [600 * MiB + i * 100 * MiB for i in range(12)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tm = tp.TorchMemProfile(near_oom=90)
        self.assertEqual(tm.near_oom, tp.DEFAULT_NEAR_OOM)
        self.assertTrue(any("not a percentage" in str(w.message) for w in caught))
        tm, _ = run_fake([500 * MiB] * 12, 12, reserved=reserved, fraction=1 / 64, env={"TORCHMEM_NEAR_OOM": "90"})
        self.assertEqual([(a["kind"], a["step"]) for a in tm.alarms], [("near_oom", 4)])

    def test_notify_command_gets_the_message_on_stdin(self):
        out = tempfile.mkdtemp(prefix="torchmem_notify_")
        record = os.path.join(out, "got.jsonl")
        command = "%s %s %s" % (sys.executable, os.path.join(RECORD, "record_stdin.py"), record)
        tm, err = run_fake(leaking(30, 3, 2 * MiB), 30, env={"TORCHMEM_NOTIFY": command})
        with open(record) as f:
            got = [json.loads(l) for l in f]
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0]["stdin"].strip(), tm.alarms[0]["message"])
        self.assertEqual(got[0]["env"]["TORCHMEM_ALARM_KIND"], "leak")
        self.assertEqual(got[0]["env"]["TORCHMEM_ALARM_RANK"], "0")

    def test_a_failing_notify_is_logged_not_raised(self):
        tm, err = run_fake(leaking(30, 0, 2 * MiB), 30, env={"TORCHMEM_NOTIFY": "/nonexistent/notify --x"})
        self.assertEqual(len(tm.alarms), 1)
        self.assertIn("TORCHMEM_NOTIFY command", err)

    def test_a_raising_on_alarm_is_logged_not_raised(self):
        def boom(alarm):
            raise RuntimeError("mail server down")

        tm, err = run_fake(leaking(30, 0, 2 * MiB), 30, on_alarm=boom)
        self.assertIn("mail server down", err)

    def test_an_output_dir_that_cannot_be_written_never_raises_into_training(self):
        # TORCHMEM_DIR on a read-only mount, a full disk, a path that is a file: the window's
        # snapshot, the leak capture and the exit dump fail with a warning; the alarm is said.
        blocker = tempfile.NamedTemporaryFile(prefix="torchmem_not_a_dir_", delete=False)
        blocker.close()
        self.addCleanup(os.remove, blocker.name)
        tm, err = run_fake(leaking(30, 12, 4 * MiB), 30, env={"TORCHMEM_DIR": blocker.name})
        self.assertEqual([a["kind"] for a in tm.alarms], ["leak"])
        self.assertEqual(tm.alarms[0]["files"], [])
        self.assertEqual(err.count("LEAK"), 1, err)
        self.assertEqual(tm.written, [])
        self.assertFalse(tm._history_on)  # no capture left the history running

    def test_rank_in_the_message(self):
        tm, err = run_fake(leaking(30, 0, 2 * MiB), 30, env={"RANK": "3"})
        self.assertEqual(tm.alarms[0]["rank"], 3)
        self.assertIn("rank 3:", tm.alarms[0]["message"])
        self.assertTrue(all("_rank3" in os.path.basename(p) for p in tm.written), tm.written)

    def test_logging_gets_the_alarm_once(self):
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        logger = logging.getLogger("torchmem")
        logger.addHandler(handler)
        try:
            tm, err = run_fake(leaking(30, 0, 2 * MiB), 30)
        finally:
            logger.removeHandler(handler)
        self.assertEqual(stream.getvalue().count("LEAK"), 1)
        self.assertEqual(err.count("LEAK"), 1)  # the handler writes elsewhere: stderr too

    def test_history_window_then_off(self):
        # Default: history on from the start, off after the schedule's last cycle (step 7).
        tm, _ = run_fake([200 * MiB] * 20, 20)
        self.assertEqual(tm.history, "window")
        self.assertEqual(tm.fake.history, [True, None])
        self.assertTrue(any(p.endswith("_rank0.snapshot.pickle.gz") for p in tm.written))
        tm, _ = run_fake([200 * MiB] * 20, 20, env={"TORCHMEM_HISTORY": "always"})
        self.assertEqual(tm.fake.history, [True, None])  # on to the end, then off at exit
        tm, _ = run_fake([200 * MiB] * 20, 20, env={"TORCHMEM_HISTORY": "0"})
        self.assertEqual(tm.fake.history, [])


if __name__ == "__main__":
    unittest.main()
