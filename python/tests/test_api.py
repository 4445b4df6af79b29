"""Tests of batchfit's Python API (batchfit.api, batchfit.binary, python -m
batchfit) against fake binaries that print canned JSON, and, where
BATCHFIT_TEST_BINARY names a real batchfit, end to end on its simulated GPU
and a trainer script that runs out of memory above 100.

Run from python/: python3 -m unittest discover -s tests (python_test.go does).
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import pathlib
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PYTHON_DIR)

import batchfit  # noqa: E402
from batchfit import api, binary  # noqa: E402

REAL = os.environ.get("BATCHFIT_TEST_BINARY", "")

# A run as the envelope holds it: every key present, null when empty.
RUN = {
    "id": "r1a2b3",
    "status": "found",
    "command": ["python", "train.py", "--batch-size", "{}"],
    "gpu": {
        "devices": [{"index": 0, "name": "NVIDIA H200", "total_bytes": 150754820096}],
        "capacity_bytes": 25769803776,
    },
    "answer": 282,
    "first_failure": 283,
    "recommended": 256,
    "margins": [
        {"percent": 5, "batch_size": 268, "basis": "searched", "why": None},
        {"percent": 10, "batch_size": None, "basis": "unknown", "why": "no model"},
    ],
    "throughput": {"steps": 14, "warmup_intervals": 3, "recommended": 256, "gain": 0.06, "sizes": [
        {"batch_size": 282, "trial": 4, "samples_per_second": 500.0, "noise": 0.004, "intervals": 10},
        {"batch_size": 256, "trial": 5, "samples_per_second": 530.0, "noise": 0.003, "intervals": 10},
    ]},
    "cached": False,
    "error": None,
    "warnings": None,
    "flaky": None,
    "trials": [
        {"n": 1, "batch_size": 64, "outcome": "ok", "seconds": 9.5, "peak_allocated_bytes": 6 << 30,
         "peak_reserved_bytes": 7 << 30, "peak_device_bytes": None, "samples_per_second": 410.5, "phase": "bracket",
         "reason": "exit status 0", "retry": False},
        {"n": 2, "batch_size": 283, "outcome": "oom", "seconds": 8.1, "peak_allocated_bytes": None,
         "peak_reserved_bytes": None, "peak_device_bytes": None, "samples_per_second": None, "phase": "refine",
         "reason": "torch.OutOfMemoryError: CUDA out of memory.", "retry": False},
        {"n": 3, "batch_size": 282, "outcome": "ok", "seconds": 10.2, "peak_allocated_bytes": 24 << 30,
         "peak_reserved_bytes": 24 << 30, "peak_device_bytes": 25 << 30, "samples_per_second": 530.0,
         "phase": "refine", "reason": "exit status 0", "retry": False},
    ],
}


def envelope(runs=None, error=None) -> dict:
    return {"schema_version": 1, "runs": [RUN] if runs is None else runs, "doctor": None, "error": error}


class FakeBinary:
    """A batchfit stand-in: records its arguments, prints stdout, stderr and
    exits with code; writes REPORT to the --report file."""

    SCRIPT = textwrap.dedent("""\
        #!{python}
        import json, os, sys
        d = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(d, "argv.json"), "w") as f:
            json.dump(sys.argv[1:], f)
        args = sys.argv[1:]
        if "--report" in args:
            with open(args[args.index("--report") + 1], "w") as f:
                f.write("<!DOCTYPE html><title>report</title><body>\\n<div class=\\"batchfit-report\\"><p>282 &amp; more</p></div>\\n</body>")
        for a in args:
            if a.startswith("--events="):
                with open(a[len("--events="):], "w") as f:
                    f.write(open(os.path.join(d, "events")).read())
        sys.stderr.write(open(os.path.join(d, "stderr")).read())
        sys.stdout.write(open(os.path.join(d, "stdout")).read())
        sys.exit(int(open(os.path.join(d, "code")).read()))
        """)

    def __init__(self, test: unittest.TestCase, stdout="", stderr="", code=0, events=()):
        self.dir = tempfile.mkdtemp(prefix="fakebatchfit-")
        test.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))
        self.path = os.path.join(self.dir, "batchfit")
        with open(self.path, "w") as f:
            f.write(self.SCRIPT.format(python=sys.executable))
        os.chmod(self.path, 0o755)
        for name, text in (("stdout", stdout if isinstance(stdout, str) else json.dumps(stdout)), ("stderr", stderr), ("code", str(code)),
                           ("events", "".join(json.dumps(e) + "\n" for e in events))):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)
        patcher = mock.patch.dict(os.environ, {binary.ENV: self.path})
        patcher.start()
        test.addCleanup(patcher.stop)

    @property
    def argv(self) -> list[str]:
        with open(os.path.join(self.dir, "argv.json")) as f:
            return json.load(f)


class ImportTest(unittest.TestCase):
    def test_import_is_cheap(self):
        # Every trial imports batchfit: it must load nothing but itself.
        code = "import sys; before = set(sys.modules); import batchfit; print(sorted(set(sys.modules) - before))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": PYTHON_DIR}).stdout
        self.assertEqual(out.strip(), "['batchfit']")

    def test_api_names(self):
        for name in ("search", "demo", "doctor", "Result", "Trial", "BatchfitError"):
            self.assertIs(getattr(batchfit, name), getattr(api, name))
            self.assertIn(name, dir(batchfit))
        with self.assertRaises(AttributeError):
            batchfit.nothing_here


class SearchTest(unittest.TestCase):
    def test_result(self):
        fake = FakeBinary(self, stdout=envelope())
        r = batchfit.search("python train.py --batch-size {}", memory_limit="24GiB", progress=False)
        self.assertEqual((r.answer, r.first_failure, r.recommended, r.margin_size, r.status), (282, 283, 256, 268, "found"))
        self.assertEqual(r.schema_version, 1)
        self.assertEqual([t.batch_size for t in r.trials], [64, 283, 282])
        ok, failed = r.proof
        self.assertEqual((ok.n, ok.batch_size, ok.outcome, failed.n, failed.outcome), (3, 282, "ok", 2, "oom"))
        self.assertEqual(ok.peaks, batchfit.Peaks(allocated=24 << 30, reserved=24 << 30, device=25 << 30))
        self.assertEqual(ok.samples_per_second, 530.0)
        self.assertIsNone(failed.samples_per_second)
        self.assertEqual(r.gpu.name, "NVIDIA H200")
        self.assertEqual(r.gpu.capacity_bytes, 24 << 30)
        self.assertEqual(r.run.id, "r1a2b3")
        self.assertEqual(r.raw["runs"][0]["answer"], 282)
        self.assertEqual(r.run.warnings, [])
        self.assertEqual(r.run.throughput.recommended, 256)
        self.assertEqual([(x.batch_size, x.samples_per_second) for x in r.run.throughput.sizes], [(282, 500.0), (256, 530.0)])
        self.assertEqual(r.margins, [batchfit.Margin(5, 268, "searched"), batchfit.Margin(10, None, "unknown", "no model")])
        self.assertEqual(r.run.flaky, [])
        argv = fake.argv
        self.assertEqual(argv[:2], ["search", "--memory-limit=24GiB"])
        self.assertEqual(argv[argv.index("--") :], ["--", "python", "train.py", "--batch-size", "{}"])
        self.assertIn("--json", argv[: argv.index("--")])

    def test_repr(self):
        FakeBinary(self, stdout=envelope())
        r = batchfit.search(["./train.sh", "{}"], progress=False)
        self.assertEqual(repr(r), "<batchfit.Result answer 282 (283 failed), 3 trials on NVIDIA H200>")
        # The report inline: the body of its page, no frame around it.
        self.assertEqual(r._repr_html_(), '<div class="batchfit-report"><p>282 &amp; more</p></div>')
        # A page of another release, without the fragment, is shown as text.
        old = api.Result(runs=r.runs, report_html="<!DOCTYPE html><style>body{}</style><p>x</p>")
        self.assertTrue(old._repr_html_().startswith("<pre>&lt;!DOCTYPE html&gt;"))

    def test_repr_html_without_report(self):
        r = api.Result(runs=[api.Run.from_json(RUN)])
        page = r._repr_html_()
        self.assertIn("<td>283</td><td>oom</td>", page)
        self.assertIn("answer 282 (283 failed)", page)

    def test_report_kept(self):
        FakeBinary(self, stdout=envelope())
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.html")
            r = batchfit.search(["./train.sh", "{}"], progress=False, report=path)
            self.assertTrue(os.path.exists(path))
            self.assertIn("<title>report</title>", r.report_html)

    def test_options(self):
        fake = FakeBinary(self, stdout=envelope())
        batchfit.search(
            ["./train.sh", "{}"], progress=False, steps=0, margin=0.05, gpus=[0, 1], fresh=True, worker=False,
            min=None, timeout=90, soak=datetime.timedelta(minutes=10), history_env=["A", "B"], gpus_per_trial=2,
            extra_args=["--sbatch-arg=--mem=0"],
        )
        argv = fake.argv
        self.assertEqual(argv[: argv.index("--json")], [
            "search", "--steps=0", "--margin=0.05", "--gpus=0,1", "--fresh", "--worker=false", "--timeout=90s",
            "--soak=600s", "--history-env=A", "--history-env=B", "--gpus-per-trial=2", "--sbatch-arg=--mem=0",
        ])

    def test_options_typed(self):
        # Each option is checked against its flag's type before batchfit
        # runs: a value can only become that flag's value.
        fake = FakeBinary(self, stdout=envelope())
        for options in (
            {"log_dir": True, "fresh": True},  # --log-dir took --fresh as its folder
            {"timeout": True},
            {"steps": True},
            {"steps": 3.5},
            {"steps": "3"},
            {"margin": False},
            {"fresh": "yes"},
            {"fresh": 1},
            {"history_env": "A"},  # one flag per character
            {"history_env": ["A", 1]},
            {"gpus": [0, True]},
            {"memory_limit": ["24GiB"]},
            {"timeout": [1, 2]},
        ):
            with self.subTest(options=options), self.assertRaises(TypeError) as cm:
                batchfit.search(["./train.sh", "{}"], progress=False, **options)
            key = next(iter(options))
            self.assertIn(f"batchfit: {key}= takes ", str(cm.exception))
            self.assertIn(f"--{key.replace('_', '-')}", str(cm.exception))
        with self.assertRaisesRegex(ValueError, "timeout= must be a finite number of seconds"):
            batchfit.search(["./train.sh", "{}"], progress=False, timeout=float("inf"))
        # Each command has its own flags: demo's sim_gpus and doctor's
        # no_fresh are checked there.
        with self.assertRaisesRegex(TypeError, "sim_gpus= takes an int"):
            batchfit.demo(progress=False, sim_gpus="2")
        with self.assertRaisesRegex(TypeError, "no_fresh= takes a bool"):
            batchfit.doctor(["x"], progress=False, no_fresh="no")
        self.assertFalse(os.path.exists(os.path.join(fake.dir, "argv.json")), "batchfit ran")

    def test_extra_args_typed(self):
        fake = FakeBinary(self, stdout=envelope())
        for extra in ("--fresh", b"--fresh", 1, ["--fresh", 2]):
            with self.subTest(extra_args=extra), self.assertRaisesRegex(TypeError, "^batchfit: extra_args= takes a sequence of str"):
                batchfit.search(["./train.sh", "{}"], progress=False, extra_args=extra)
        self.assertFalse(os.path.exists(os.path.join(fake.dir, "argv.json")), "batchfit ran")
        batchfit.search(["./train.sh", "{}"], progress=False, extra_args=("--fresh", "--log-dir", "logs"))
        argv = fake.argv
        self.assertEqual(argv[1 : argv.index("--json")], ["--fresh", "--log-dir", "logs"])

    def test_options_accepted(self):
        fake = FakeBinary(self, stdout=envelope())
        batchfit.search(
            ["./train.sh", "{}"], progress=False, log_dir=pathlib.Path("logs"), fresh=False, memory_limit="24GiB",
            margin="10%", gpus="all", start_timeout=None, history_max_age=datetime.timedelta(hours=12), timeout=0.5,
            soak="10m", max=2**20, history_env=("A",),
        )
        argv = fake.argv
        self.assertEqual(argv[1 : argv.index("--json")], [
            "--log-dir=logs", "--fresh=false", "--memory-limit=24GiB", "--margin=10%", "--gpus=all",
            "--history-max-age=43200s", "--timeout=0.5s", "--soak=10m", "--max=1048576", "--history-env=A",
        ])
        # An option the API's table lacks goes to batchfit, which decides;
        # its value stays joined to it.
        batchfit.search(["./train.sh", "{}"], progress=False, sim_gpus=2, bogus=True, other=["a", 1])
        argv = fake.argv
        self.assertEqual(argv[1 : argv.index("--json")], ["--sim-gpus=2", "--bogus=true", "--other=a", "--other=1"])

    def test_flag_table(self):
        # flags.json (kept equal to the binary's flags by a Go test) holds
        # only flag types the API knows how to check.
        table = api._flag_types()
        self.assertEqual(sorted(table), ["demo", "doctor", "search"])
        self.assertEqual({t for flags in table.values() for t in flags.values()} - set(api._KINDS), set())
        self.assertEqual((table["search"]["fresh"], table["search"]["log-dir"], table["doctor"]["timeout"]), ("bool", "string", "duration"))

    def test_reserved_options(self):
        FakeBinary(self, stdout=envelope())
        for key in ("json", "quiet", "q"):
            with self.assertRaises(TypeError):
                batchfit.search(["x"], progress=False, **{key: True})
        with self.assertRaises(ValueError):
            batchfit.search("", progress=False)

    def test_several_runs(self):
        other = copy.deepcopy(RUN)
        other["answer"], other["gpu"]["devices"][0]["name"] = 140, "NVIDIA A100 80GB"
        FakeBinary(self, stdout=envelope(runs=[RUN, other]))
        r = batchfit.search(["./train.sh", "{}"], per_gpu_model=True, progress=False)
        self.assertEqual([run.answer for run in r.runs], [282, 140])
        self.assertEqual(r.answer, 282)
        self.assertIn("; answer 140", repr(r))

    def test_progress(self):
        FakeBinary(self, stdout=envelope(), stderr="batchfit: trial 1: batch 64 ok\n")
        with mock.patch.object(sys, "stderr", new=__import__("io").StringIO()) as err:
            batchfit.search(["./train.sh", "{}"])
        self.assertEqual(err.getvalue(), "batchfit: trial 1: batch 64 ok\n")
        with mock.patch.object(sys, "stderr", new=__import__("io").StringIO()) as err:
            batchfit.search(["./train.sh", "{}"], progress=False)
        self.assertEqual(err.getvalue(), "")


class NotebookTest(unittest.TestCase):
    """In a notebook's kernel (ipykernel loaded, get_ipython() with a kernel)
    a search is one HTML display updated from batchfit's --events lines,
    and its stderr lines stay off sys.stderr."""

    EVENTS = [
        {"event": "start", "title": "batchfit demo", "gpu": "NVIDIA H100 (simulated)", "capacity_bytes": 80 << 30, "limit_bytes": 0},
        {"event": "phase", "phase": "bracket", "lo": 0, "hi": 0},
        {"event": "plan", "phase": "bracket", "lo": 0, "hi": 0, "sizes": [952], "rounds": 1},
        {"event": "trial_started", "n": 1, "batch_size": 952},
        {"event": "trial", "trial": {"n": 1, "batch_size": 952, "outcome": "ok", "seconds": 0.1, "phase": "bracket"},
         "memory_text": "79.92 GiB", "memory_bytes": 1, "needs_more": False},
        {"event": "plan", "phase": "bracket", "lo": 952, "hi": 0, "sizes": [953], "rounds": 1},
        {"event": "trial", "trial": {"n": 2, "batch_size": 953, "outcome": "oom", "seconds": 0.1, "phase": "bracket"},
         "memory_text": "> 79.99 GiB", "memory_bytes": 2, "needs_more": True},
        {"event": "bracket", "phase": "bracket", "lo": 952, "hi": 953},
        {"event": "end"},
    ]

    def kernel(self) -> list:
        """Stand-ins for ipykernel and IPython; the display's states, in order."""
        shown: list = []

        class Handle:
            def update(self, obj):
                shown.append(obj.data)

        def display(obj, display_id=False):
            self.assertTrue(display_id)
            shown.append(obj.data)
            return Handle()

        ipython = mock.MagicMock()
        ipython.get_ipython.return_value = mock.Mock(kernel=object())
        ipython.display.HTML = lambda data: mock.Mock(data=data)
        ipython.display.display = display
        patcher = mock.patch.dict(sys.modules, {"ipykernel": mock.Mock(), "IPython": ipython, "IPython.display": ipython.display})
        patcher.start()
        self.addCleanup(patcher.stop)
        return shown

    def test_live_view(self):
        fake = FakeBinary(self, stdout=envelope(), stderr="batchfit: trial 1: batch 952 ok\n", events=self.EVENTS)
        shown = self.kernel()
        with mock.patch.object(sys, "stderr", new=__import__("io").StringIO()) as err:
            r = batchfit.search(["./train.sh", "{}"])
        self.assertEqual(r.answer, 282)
        self.assertEqual(err.getvalue(), "")
        argv = fake.argv
        events = [a for a in argv if a.startswith("--events=/dev/fd/")]
        self.assertEqual(len(events), 1)
        self.assertLess(argv.index(events[0]), argv.index("--"))
        last = shown[-1]
        self.assertIn('class="batchfit-live"', last)
        self.assertIn('data-done="true"', last)
        self.assertIn("bracket [952, 953] · 2 rounds · 2 trials · finished", last)
        self.assertIn("<td>bracket</td>", last)
        self.assertIn("&gt; 79.99 GiB", last)
        self.assertIn("NVIDIA H100 (simulated), 80.00 GiB", last)

    def test_second_interrupt(self):
        # A second Ctrl-C kills batchfit: the view ends, saying so, rather
        # than go on showing a trial as running.
        FakeBinary(self, stdout=envelope(), events=self.EVENTS[:4])
        shown = self.kernel()
        with mock.patch.object(api, "_wait", side_effect=[KeyboardInterrupt, KeyboardInterrupt]):
            with self.assertRaises(KeyboardInterrupt):
                batchfit.search(["./train.sh", "{}"])
        self.assertIn("finished: killed at a second interrupt", shown[-1])
        self.assertNotIn("running trial", shown[-1])

    def test_answer_from_the_history(self):
        # No trial ran, so no event came: the view says what batchfit said.
        FakeBinary(self, stdout=envelope(), stderr="batchfit: answered from the history (run r1, 5s old); --fresh searches again\n",
                   events=[])
        shown = self.kernel()
        batchfit.search(["./train.sh", "{}"])
        self.assertIn("answered from the history (run r1, 5s old)", shown[-1])
        self.assertIn("0 trials · finished", shown[-1])

    def test_terminal_without_kernel(self):
        fake = FakeBinary(self, stdout=envelope(), stderr="batchfit: trial 1: batch 952 ok\n", events=self.EVENTS)
        with mock.patch.object(sys, "stderr", new=__import__("io").StringIO()) as err:
            batchfit.search(["./train.sh", "{}"])
        self.assertEqual(err.getvalue(), "batchfit: trial 1: batch 952 ok\n")
        self.assertFalse(any(a.startswith("--events") for a in fake.argv))

    def test_no_progress(self):
        fake = FakeBinary(self, stdout=envelope(), events=self.EVENTS)
        shown = self.kernel()
        batchfit.search(["./train.sh", "{}"], progress=False)
        self.assertEqual(shown, [])
        self.assertFalse(any(a.startswith("--events") for a in fake.argv))


class ErrorTest(unittest.TestCase):
    def test_nothing_fits(self):
        run = {**RUN, "status": "nothing_fits", "answer": None, "first_failure": None, "recommended": None,
               "margins": [{"percent": 5, "batch_size": None, "basis": "unknown", "why": "no answer"}], "error": "nothing fits: batch size 64 does not run: out of GPU memory"}
        error = {"message": run["error"], "hint": "lower --min", "exit_code": 3}
        FakeBinary(self, stdout=envelope(runs=[run], error=error), code=3)
        with self.assertRaises(batchfit.BatchfitError) as cm:
            batchfit.search(["./train.sh", "{}"], progress=False)
        e = cm.exception
        self.assertEqual((e.message, e.hint, e.exit_code), (run["error"], "lower --min", 3))
        self.assertEqual(str(e), f"{run['error']}\nhint: lower --min")
        self.assertEqual(e.result.status, "nothing_fits")
        self.assertIsNone(e.result.answer)
        self.assertIsNone(e.result.proof)

    def test_error_before_a_run(self):
        error = {"message": "open the history: database is locked", "hint": "use --no-db", "exit_code": 1}
        FakeBinary(self, stdout=envelope(runs=[], error=error), code=1)
        with self.assertRaises(batchfit.BatchfitError) as cm:
            batchfit.search(["./train.sh", "{}"], progress=False)
        self.assertEqual((cm.exception.message, cm.exception.exit_code, cm.exception.result), (error["message"], 1, None))

    def test_usage_error(self):
        # A usage error prints nothing on stdout; stderr says what was wrong.
        FakeBinary(self, stderr="batchfit: error: unknown flag: --bogus\nbatchfit: hint: run 'batchfit search --help' for usage\n", code=2)
        with self.assertRaises(batchfit.BatchfitError) as cm:
            batchfit.search(["./train.sh", "{}"], bogus=1, progress=False)
        e = cm.exception
        self.assertEqual((e.message, e.hint, e.exit_code), ("unknown flag: --bogus", "run 'batchfit search --help' for usage", 2))
        self.assertIn("unknown flag", e.stderr)

    def test_other_schema(self):
        FakeBinary(self, stdout={**envelope(), "schema_version": 2})
        with self.assertRaisesRegex(batchfit.BatchfitError, "schema version 2"):
            batchfit.search(["./train.sh", "{}"], progress=False)

    def test_not_json(self):
        FakeBinary(self, stdout="largest batch size that runs: 1\n")
        with self.assertRaisesRegex(batchfit.BatchfitError, "no JSON document"):
            batchfit.search(["./train.sh", "{}"], progress=False)

    def test_no_binary(self):
        with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, {binary.ENV: os.path.join(d, "missing")}):
            with self.assertRaisesRegex(batchfit.BatchfitError, "not an executable file"):
                batchfit.search(["x"], progress=False)

    def test_legacy_documents(self):
        # Binaries before schema_version 1: a run, a list, an error object.
        env = api._envelope(RUN, 0, "")
        self.assertEqual((env["runs"], env["error"]), ([RUN], None))
        self.assertEqual(api._envelope([RUN, RUN], 0, "")["runs"], [RUN, RUN])
        self.assertEqual(api.Run.from_json({"margin_size": 268}).margin_size, 268)
        failed = {"status": "failed", "error": "open the history: locked", "hint": "use --no-db", "exit_code": 1}
        env = api._envelope(failed, 1, "")
        self.assertEqual((env["runs"], env["error"]), ([], {"message": "open the history: locked", "hint": "use --no-db", "exit_code": 1}))
        env = api._envelope({**RUN, "status": "nothing_fits", "error": "nothing fits"}, 3, "batchfit: hint: lower --min\n")
        self.assertEqual(env["error"], {"message": "nothing fits", "hint": "lower --min", "exit_code": 3})


def wait_for(path: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear in {timeout:g} s")
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    """The processes whose parent is pid, from /proc."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except (OSError, ValueError):
            continue
        if name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(name))
    return found


def running(pid: int) -> bool:
    """Whether pid is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def await_gone(test: unittest.TestCase, pids: dict[str, int], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while any(running(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    test.assertEqual({name: p for name, p in pids.items() if running(p)}, {}, f"still running {timeout:g} s later")


class InterruptTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))

    def fake(self, body: str) -> str:
        path = os.path.join(self.dir, "batchfit")
        with open(path, "w") as f:
            f.write(f"#!{sys.executable}\n" + textwrap.dedent(body))
        os.chmod(path, 0o755)
        return path

    def test_ctrl_c_reaches_batchfit(self):
        # A KeyboardInterrupt while batchfit runs sends it SIGINT, waits for
        # it to stop its trials and raises the BatchfitError it printed,
        # with the run so far, from the KeyboardInterrupt.
        run = {**RUN, "status": "interrupted", "answer": None, "first_failure": None, "error": "interrupted"}
        doc = envelope(runs=[run], error={"message": "interrupted; every trial process was stopped", "hint": "", "exit_code": 130})
        fake = self.fake(f"""\
            import signal, sys, time
            def stop(*_):
                open({os.path.join(self.dir, "stopped")!r}, "w").write("SIGINT")
                print({json.dumps(doc)!r})
                sys.exit(130)
            signal.signal(signal.SIGINT, stop)
            open({os.path.join(self.dir, "started")!r}, "w").close()
            time.sleep(60)
            """)
        code = textwrap.dedent("""\
            import batchfit
            try:
                batchfit.search(["x"], progress=False)
            except batchfit.BatchfitError as e:
                print(e.exit_code, e.message, e.result.status, len(e.result.trials), type(e.__cause__).__name__)
            """)
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": PYTHON_DIR, binary.ENV: fake})
        wait_for(os.path.join(self.dir, "started"))
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(out, "130 interrupted; every trial process was stopped interrupted 3 KeyboardInterrupt\n")
        with open(os.path.join(self.dir, "stopped")) as f:
            self.assertEqual(f.read(), "SIGINT")

    def test_parent_pipe(self):
        # batchfit gets a pipe ($BATCHFIT_PARENT_FD) whose write end only
        # the Python process holds: it ends when that process is killed.
        fake = self.fake(f"""\
            import os, stat
            fd = int(os.environ["BATCHFIT_PARENT_FD"])
            assert stat.S_ISFIFO(os.fstat(fd).st_mode)
            open({os.path.join(self.dir, "started")!r}, "w").close()
            while os.read(fd, 4096):
                pass
            open({os.path.join(self.dir, "ended")!r}, "w").close()
            """)
        proc = subprocess.Popen([sys.executable, "-c", "import batchfit; batchfit.search(['x'], progress=False)"],
                                env={**os.environ, "PYTHONPATH": PYTHON_DIR, binary.ENV: fake})
        wait_for(os.path.join(self.dir, "started"))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "ended")))
        proc.kill()
        proc.wait()
        wait_for(os.path.join(self.dir, "ended"), timeout=10)


class DoctorTest(unittest.TestCase):
    REPORT = {"size": 8, "oom_size": 64, "trials": [], "findings": [
        {"kind": "retained_after_oom", "severity": "problem", "summary": "6.0 MiB stays allocated", "bytes": 6291456,
         "cause": "the failed step's tensors are still referenced", "fix": "leave the except block first"}]}

    def test_report(self):
        fake = FakeBinary(self, stdout=self.REPORT)
        r = batchfit.doctor("python -m batchfit.worker leaky:Trial", size=8, no_fresh=True, progress=False)
        self.assertEqual((r.size, r.oom_size), (8, 64))
        self.assertEqual(r.findings[0].kind, "retained_after_oom")
        self.assertEqual(r.findings[0].bytes, 6291456)
        self.assertEqual(fake.argv, ["doctor", "--json", "--size=8", "--no-fresh", "--", "python", "-m", "batchfit.worker", "leaky:Trial"])

    def test_enveloped(self):
        FakeBinary(self, stdout={"schema_version": 1, "runs": [], "doctor": self.REPORT, "error": None})
        self.assertEqual(batchfit.doctor(["x"], progress=False).oom_size, 64)

    def test_error(self):
        error = {"message": "the worker did not start", "hint": "see its log", "exit_code": 1}
        FakeBinary(self, stdout={"schema_version": 1, "runs": [], "doctor": None, "error": error}, code=1)
        with self.assertRaisesRegex(batchfit.BatchfitError, "the worker did not start"):
            batchfit.doctor(["x"], progress=False)


class BinaryTest(unittest.TestCase):
    def test_env_first(self):
        fake = FakeBinary(self)
        self.assertEqual(binary.find(), fake.path)

    def test_path_last(self):
        fake = FakeBinary(self)
        with mock.patch.dict(os.environ, {binary.ENV: "", "PATH": fake.dir}), mock.patch.object(binary, "installed", return_value=None):
            self.assertEqual(binary.find(), fake.path)
        with mock.patch.dict(os.environ, {binary.ENV: "", "PATH": ""}), mock.patch.object(binary, "installed", return_value=None):
            with self.assertRaisesRegex(FileNotFoundError, "no batchfit binary"):
                binary.find()

    def test_main_execs_the_binary(self):
        fake = FakeBinary(self, stdout="batchfit version v1.2.3\n", code=7)
        p = subprocess.run([sys.executable, "-m", "batchfit", "--version"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": PYTHON_DIR})
        self.assertEqual((p.stdout, p.returncode), ("batchfit version v1.2.3\n", 7))
        self.assertEqual(fake.argv, ["--version"])


@unittest.skipUnless(REAL, "BATCHFIT_TEST_BINARY names no batchfit binary")
class RealBinaryTest(unittest.TestCase):
    """End to end through a real batchfit: the simulated GPU, and a trainer
    script that prints torch's out-of-memory error above 100."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="batchfit-api-")
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))
        self.trainer = os.path.join(self.dir, "trainer.sh")
        with open(self.trainer, "w") as f:
            f.write(textwrap.dedent("""\
                #!/bin/sh
                if [ "$1" -gt 100 ]; then
                	echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.' >&2
                	exit 1
                fi
                echo "trained at $1"
                """))
        os.chmod(self.trainer, os.stat(self.trainer).st_mode | stat.S_IXUSR)
        patcher = mock.patch.dict(os.environ, {binary.ENV: REAL, "XDG_CACHE_HOME": os.path.join(self.dir, "cache")})
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_demo(self):
        r = batchfit.demo(progress=False)
        self.assertEqual((r.schema_version, r.status), (1, "found"))
        self.assertEqual(r.margins[0].percent, 5)
        self.assertEqual(r.margin_size, r.margins[0].batch_size)
        self.assertTrue(all(t.samples_per_second for t in r.trials if t.ok))
        ok, failed = r.proof
        self.assertEqual((ok.batch_size, ok.outcome), (r.answer, "ok"))
        self.assertEqual(failed.batch_size, r.answer + 1)
        self.assertNotEqual(failed.outcome, "ok")
        # What the failure needed at least lies above what the size below
        # it used: one figure, as the CLI's summary shows it.
        self.assertEqual(failed.needed_basis, "process")
        self.assertGreater(failed.needed, max(ok.peaks.allocated or 0, ok.peaks.device or 0))
        self.assertIn("simulated", r.gpu.name)
        self.assertIn("<svg", r.report_html)
        page = r._repr_html_()
        self.assertTrue(page.startswith('<div class="batchfit-report">'), page[:80])
        self.assertNotIn("<iframe", page)

    def test_memory_limit_without_unit(self):
        # A bare number would read as bytes (0.5 as no limit at all): the
        # binary refuses it, and the API raises with its message and hint.
        for limit in (0.5, "24", 24):
            with self.subTest(limit=limit):
                with self.assertRaises(batchfit.BatchfitError) as ctx:
                    batchfit.demo(progress=False, no_db=True, memory_limit=limit)
                self.assertEqual(ctx.exception.exit_code, 2)
                self.assertIn("is a number without a unit", str(ctx.exception))
        r = batchfit.demo(progress=False, no_db=True, memory_limit="50%")
        self.assertEqual(r.answer, 469)

    def test_options(self):
        # The flags the API writes are the binary's: joined values, a bool
        # flag set false, durations from seconds and a timedelta.
        r = batchfit.demo(progress=False, fresh=False, no_db=True, timeout=90, soak=None, steps=3,
                          cache_max_age=datetime.timedelta(days=1), cache_env=["A", "B"], margin=0.1,
                          log_dir=pathlib.Path(self.dir, "logs"), sim_gpus=1)
        self.assertEqual(r.status, "found")
        self.assertTrue(os.listdir(os.path.join(self.dir, "logs")))

    def start_slow_search(self) -> tuple[subprocess.Popen, dict[str, int]]:
        """A Python process in batchfit.search on a trainer that hangs from
        size 8, once the trial at 8 runs; the pids of batchfit and that
        trial."""
        slow = os.path.join(self.dir, "slow.sh")
        with open(slow, "w") as f:
            f.write(textwrap.dedent(f"""\
                #!/bin/sh
                if [ "$1" -ge 8 ]; then
                	echo $$ > {self.dir}/trainer.pid.tmp && mv {self.dir}/trainer.pid.tmp {self.dir}/trainer.pid
                	exec sleep 600
                fi
                """))
        os.chmod(slow, 0o755)
        if os.path.exists(os.path.join(self.dir, "trainer.pid")):
            os.remove(os.path.join(self.dir, "trainer.pid"))
        code = textwrap.dedent(f"""\
            import batchfit
            try:
                batchfit.search([{slow!r}, "{{}}"], progress=False, cwd={self.dir!r})
            except batchfit.BatchfitError as e:
                print(e.exit_code, e.result.status, e.result.trials[-1].batch_size, e.result.trials[-1].outcome, type(e.__cause__).__name__)
            """)
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": PYTHON_DIR})
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        wait_for(os.path.join(self.dir, "trainer.pid"))
        with open(os.path.join(self.dir, "trainer.pid")) as f:
            trainer = int(f.read())
        (bf,) = children(proc.pid)
        self.assertTrue(running(trainer))
        return proc, {"batchfit": bf, "trainer": trainer}

    def test_ctrl_c(self):
        # Ctrl-C: batchfit stops the trial and the search raises
        # BatchfitError with the run so far, from the KeyboardInterrupt.
        proc, pids = self.start_slow_search()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(out, "130 interrupted 8 canceled KeyboardInterrupt\n")
        await_gone(self, pids)

    def test_parent_killed(self):
        # batchfit and its trial end soon after the Python process that
        # started them, however it was killed, and the history records the
        # run as interrupted, as after Ctrl-C.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with self.subTest(signal=sig.name):
                proc, pids = self.start_slow_search()
                proc.send_signal(sig)
                out, _ = proc.communicate(timeout=30)
                self.assertEqual((proc.returncode, out), (-sig, ""))
                await_gone(self, pids)
                history = json.loads(subprocess.run([REAL, "history", "--json"], capture_output=True, text=True, check=True).stdout)
                self.assertEqual(history["runs"][0]["status"], "interrupted")

    def test_search(self):
        r = batchfit.search([self.trainer, "{}"], max=1000, progress=False, cwd=self.dir)
        self.assertEqual((r.answer, r.first_failure, r.status), (100, 101, "found"))
        self.assertEqual(r.proof[1].outcome, "oom")
        again = batchfit.search(f"{self.trainer} {{}}", max=1000, progress=False, cwd=self.dir)
        self.assertTrue(again.run.cached)
        self.assertEqual(again.answer, 100)

    def test_nothing_fits(self):
        with self.assertRaises(batchfit.BatchfitError) as cm:
            batchfit.search([self.trainer, "{}"], min=200, no_db=True, progress=False)
        e = cm.exception
        self.assertEqual(e.exit_code, 3)
        self.assertIn("nothing fits", e.message)
        self.assertTrue(e.hint)
        self.assertEqual(e.result.status, "nothing_fits")

    def test_usage_error(self):
        with self.assertRaises(batchfit.BatchfitError) as cm:
            batchfit.search([self.trainer, "{}"], bogus=1, progress=False)
        self.assertEqual((cm.exception.exit_code, cm.exception.message), (2, "unknown flag: --bogus"))


if __name__ == "__main__":
    unittest.main()
