"""Tests of batchfit.batch_size() (batchfit.size) and the Lightning callback
that searches (batchfit.lightning.BatchFit): the trial's size in a trial,
the command that runs the program again, the refusals, and the search
through a fake binary. The search of a real script with Debian's torch is
cmd/batchfit/testdata/script/oneline.txtar.

Run from python/: python3 -m unittest tests.test_size
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import types
import unittest
from contextlib import redirect_stderr
from unittest import mock

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PYTHON_DIR)

import batchfit  # noqa: E402
from batchfit import size  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_api import RUN, FakeBinary, envelope  # noqa: E402

# No batchfit to run: a search reached by mistake fails loudly.
NO_BINARY = {"BATCHFIT_BINARY": "/nonexistent/batchfit"}
TRIAL = {"BATCHFIT_REPORT": "/nonexistent/report.jsonl", "BATCHFIT_BATCH_SIZE": "12"}


def outside_trial() -> mock._patch:
    """os.environ without batchfit's trial variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("BATCHFIT_REPORT", "BATCHFIT_BATCH_SIZE", "BATCHFIT_ANSWER",
                                                           "WORLD_SIZE")}
    return mock.patch.dict(os.environ, env, clear=True)


def fake_sys(**attrs) -> types.SimpleNamespace:
    """A stand-in sys for size.command(): a script run plainly, unless attrs say otherwise."""
    base = {"executable": "/venv/bin/python", "argv": ["train.py", "--lr", "1"], "modules": {},
            "flags": types.SimpleNamespace(interactive=0)}
    base.update(attrs)
    return types.SimpleNamespace(**base)


class TrialTest(unittest.TestCase):
    def setUp(self):
        # The hook's state, as the hook leaves it in a trial: every test
        # here starts from a program that has not read its size.
        from batchfit._runtime.state import state

        state.size_read = False
        self.addCleanup(setattr, state, "size_read", False)

    def test_trial_size_at_once(self):
        with mock.patch.dict(os.environ, {**TRIAL, **NO_BINARY}):
            self.assertEqual(batchfit.batch_size(memory_limit="24GiB"), 12)

    def test_size_read_in_the_exit_event(self):
        from batchfit._runtime import report

        self.assertNotIn("size_read", report.exit_event())
        with mock.patch.dict(os.environ, TRIAL):
            batchfit.batch_size()
        self.assertIs(report.exit_event()["size_read"], True)

    def test_trial_without_a_size(self):
        for value in ("", "0", "twelve"):
            with self.subTest(value=value), mock.patch.dict(os.environ, {**TRIAL, "BATCHFIT_BATCH_SIZE": value}):
                with self.assertRaises(batchfit.BatchfitError) as ctx:
                    batchfit.batch_size()
                self.assertIn("BATCHFIT_BATCH_SIZE is", str(ctx.exception))

    def test_in_a_warm_worker(self):
        # A warm worker's Trial module calling it at import: no size is
        # the process's, and neither a trial's variables nor a search apply.
        from batchfit._runtime import worker

        self.addCleanup(setattr, worker, "serving", False)
        worker.serving = True
        for env in (TRIAL, {}):
            with self.subTest(env=env), outside_trial(), mock.patch.dict(os.environ, {**env, **NO_BINARY}):
                with self.assertRaises(batchfit.BatchfitError) as ctx:
                    batchfit.batch_size()
                self.assertIn("warm worker", str(ctx.exception))
                self.assertIn("in its step", ctx.exception.hint)

    def test_a_worker_serves_before_it_loads_the_trial(self):
        # worker.main notes that it serves before the Trial's module is
        # imported (Worker(target)), where batch_size() would be called.
        from batchfit._runtime import state as runtime_state
        from batchfit._runtime import worker

        seen = []

        class Loading:
            def __init__(self, target, **_):
                seen.append(worker.serving)
                raise RuntimeError("the Trial module failed to import")

        to_worker, from_batchfit = os.pipe()
        from_worker, to_batchfit = os.pipe()
        self.addCleanup(setattr, worker, "serving", False)
        self.addCleanup(setattr, runtime_state.state, "stop_at", runtime_state.state.stop_at)
        with mock.patch.object(worker, "Worker", Loading), redirect_stderr(io.StringIO()), \
                mock.patch.dict(os.environ, {worker.FDS_ENV: f"{to_worker},{to_batchfit}"}):
            self.assertEqual(worker.main(["mymodule:Trial"]), 1)
        os.close(from_batchfit)
        os.close(to_batchfit)
        with os.fdopen(from_worker, "rb") as f:
            fatal = json.loads(f.readline())
        self.assertEqual((seen, fatal["type"], fatal["stage"]), ([True], "fatal", "setup"))

    def test_trial_imports_nothing_else(self):
        # A trial that calls it loads batchfit.size and what it imports:
        # os and sys, loaded already, and __future__.
        code = ("import sys; before = set(sys.modules); import batchfit; n = batchfit.batch_size(); "
                "print(n, sorted(set(sys.modules) - before))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, **TRIAL, **NO_BINARY, "PYTHONPATH": PYTHON_DIR}).stdout
        self.assertEqual(out.strip(), "12 ['__future__', 'batchfit', 'batchfit.size']")


class CommandTest(unittest.TestCase):
    def command(self, **attrs) -> list[str]:
        with mock.patch.object(size, "sys", fake_sys(**attrs)):
            return size.command()

    def test_orig_argv(self):
        # The interpreter's options and -m come from sys.orig_argv, the
        # interpreter itself from sys.executable.
        self.assertEqual(self.command(orig_argv=["python3", "-u", "-X", "dev", "-m", "pkg.train", "--lr", "1"],
                                      argv=["/src/pkg/train.py", "--lr", "1"]),
                         ["/venv/bin/python", "-u", "-X", "dev", "-m", "pkg.train", "--lr", "1"])
        self.assertEqual(self.command(orig_argv=["python", "train.py", "--lr", "1"]),
                         ["/venv/bin/python", "train.py", "--lr", "1"])

    def test_a_script_run_again_from_anywhere(self):
        # The program went elsewhere (os.chdir) before the call: the
        # script's absolute path runs it again from the cwd it is in.
        main = types.SimpleNamespace(__spec__=None, __file__="/src/sub/train.py")
        self.assertEqual(self.command(orig_argv=["python", "sub/train.py", "--lr", "1"], argv=["sub/train.py", "--lr", "1"],
                                      modules={"__main__": main}),
                         ["/venv/bin/python", "/src/sub/train.py", "--lr", "1"])

    def test_before_orig_argv(self):
        self.assertEqual(self.command(), ["/venv/bin/python", "train.py", "--lr", "1"])
        # python -m pkg: sys.argv[0] is pkg/__main__.py, and __main__'s spec names the module.
        main = types.SimpleNamespace(__spec__=types.SimpleNamespace(name="pkg.__main__"))
        self.assertEqual(self.command(argv=["/src/pkg/__main__.py", "fit"], modules={"__main__": main}),
                         ["/venv/bin/python", "-m", "pkg", "fit"])
        main = types.SimpleNamespace(__spec__=types.SimpleNamespace(name="pkg.train"))
        self.assertEqual(self.command(argv=["/src/pkg/train.py"], modules={"__main__": main}),
                         ["/venv/bin/python", "-m", "pkg.train"])
        # python app.zip, python appdir/: argv[0] runs it again.
        main = types.SimpleNamespace(__spec__=types.SimpleNamespace(name="__main__"))
        self.assertEqual(self.command(argv=["app.zip", "fit"], modules={"__main__": main}),
                         ["/venv/bin/python", "app.zip", "fit"])
        with self.assertRaises(batchfit.BatchfitError) as ctx:
            self.command(argv=["-c"])
        self.assertIn("python -c", str(ctx.exception))

    def test_nothing_to_run_again(self):
        shell = types.SimpleNamespace(get_ipython=lambda: object())
        for name, attrs in (("REPL", {"ps1": ">>> ", "argv": [""]}),
                            ("python -i", {"flags": types.SimpleNamespace(interactive=1)}),
                            ("stdin", {"argv": ["-"]}),
                            ("notebook", {"argv": ["/x/ipykernel_launcher.py", "-f", "k.json"], "modules": {"IPython": shell}})):
            with self.subTest(name), self.assertRaises(batchfit.BatchfitError) as ctx:
                self.command(**attrs)
            self.assertIn("running this program again", str(ctx.exception))
            self.assertIn("batchfit.search(", ctx.exception.hint)
        # IPython imported by a script that runs plainly is no shell.
        plain = types.SimpleNamespace(get_ipython=lambda: None)
        self.assertEqual(self.command(modules={"IPython": plain}), ["/venv/bin/python", "train.py", "--lr", "1"])


class RefusalTest(unittest.TestCase):
    def setUp(self):
        patcher = outside_trial()
        patcher.start()
        self.addCleanup(patcher.stop)

    def stand_in(self, name: str, module: object) -> None:
        patcher = mock.patch.dict(sys.modules, {name: module})
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_cuda_initialised(self):
        fake = FakeBinary(self, stdout=envelope())
        self.stand_in("torch", types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True)))
        with self.assertRaises(batchfit.BatchfitError) as ctx:
            batchfit.batch_size(memory_limit="24GiB")
        self.assertIn("must run before this program uses the GPU: torch has initialised CUDA", str(ctx.exception))
        self.assertEqual(ctx.exception.hint, "call batchfit.batch_size() before the model or any tensor moves to the GPU")
        self.assertFalse(os.path.exists(os.path.join(fake.dir, "argv.json")), "batchfit ran")

    def test_cuda_not_initialised(self):
        FakeBinary(self, stdout=envelope())
        self.stand_in("torch", types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: False)))
        with redirect_stderr(io.StringIO()):
            self.assertEqual(batchfit.batch_size(), 282)

    def test_jax_backends(self):
        FakeBinary(self, stdout=envelope())
        bridge = types.SimpleNamespace(_backends={"cpu": object()})
        self.stand_in("jax._src.xla_bridge", bridge)
        with redirect_stderr(io.StringIO()):
            self.assertEqual(batchfit.batch_size(), 282, "a CPU backend holds nothing on the GPU")
        os.environ.pop("BATCHFIT_ANSWER")  # a program that has not searched yet
        bridge._backends["cuda"] = object()
        with self.assertRaises(batchfit.BatchfitError) as ctx:
            batchfit.batch_size()
        self.assertIn("JAX has initialised its cuda backend", str(ctx.exception))
        # A jaxlib without _backends: its own word.
        self.stand_in("jax._src.xla_bridge", types.SimpleNamespace(backends_are_initialized=lambda: True))
        with self.assertRaises(batchfit.BatchfitError) as ctx:
            batchfit.batch_size()
        self.assertIn("JAX has initialised its backends", str(ctx.exception))

    def test_one_rank_of_several(self):
        FakeBinary(self, stdout=envelope())
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "2"}), self.assertRaises(batchfit.BatchfitError) as ctx:
            batchfit.batch_size()
        self.assertIn("one of 2 (WORLD_SIZE)", str(ctx.exception))
        self.assertIn("batchfit search -- torchrun", ctx.exception.hint)


class SearchTest(unittest.TestCase):
    def setUp(self):
        patcher = outside_trial()
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_the_processes_it_starts_take_its_answer(self):
        # A spawned DataLoader worker or another rank runs the top level
        # again: it inherits the answer and searches nothing (no binary).
        FakeBinary(self, stdout=envelope())
        with mock.patch.object(size, "command", return_value=["/venv/bin/python", "train.py"]), \
                redirect_stderr(io.StringIO()):
            self.assertEqual(batchfit.batch_size(), 282)
        self.assertEqual(os.environ["BATCHFIT_ANSWER"], "282")
        with mock.patch.dict(os.environ, {**NO_BINARY, "WORLD_SIZE": "2"}):
            self.assertEqual(batchfit.batch_size(), 282)

    def test_searches_this_program(self):
        fake = FakeBinary(self, stdout=envelope(), stderr="batchfit: trial 1: batch 64 ok in 9.5s\n")
        err = io.StringIO()
        with mock.patch.object(size, "command", return_value=["/venv/bin/python", "train.py", "--lr", "1"]), redirect_stderr(err):
            self.assertEqual(batchfit.batch_size(memory_limit="24GiB", steps=3, extra_args=["--fresh"]), 282)
        argv = fake.argv
        report = argv[argv.index("--report") + 1]
        self.assertEqual(argv, ["search", "--memory-limit=24GiB", "--steps=3", "--fresh", "--json", "--report", report,
                                "--", "/venv/bin/python", "train.py", "--lr", "1"])
        self.assertEqual(err.getvalue(), "batchfit: trial 1: batch 64 ok in 9.5s\n"
                                         "batchfit: batch size 282 (answer 282 (283 failed), 3 trials on NVIDIA H200)\n")
        # progress=False: nothing on stderr.
        err = io.StringIO()
        with redirect_stderr(err):
            batchfit.batch_size(progress=False)
        self.assertEqual(err.getvalue(), "")

    def test_options_are_checked_as_search_checks_them(self):
        FakeBinary(self, stdout=envelope())
        with self.assertRaises(TypeError):
            batchfit.batch_size(steps="3")
        with self.assertRaises(TypeError):
            batchfit.batch_size(json=True)

    def test_no_answer(self):
        error = {"message": "nothing fits: batch size 1 does not run: out of GPU memory", "hint": "check that it fits", "exit_code": 3}
        run = {**RUN, "status": "nothing_fits", "answer": None, "first_failure": 1, "error": error}
        FakeBinary(self, stdout=envelope(runs=[run], error=error), code=3)
        with redirect_stderr(io.StringIO()), self.assertRaises(batchfit.BatchfitError) as ctx:
            batchfit.batch_size()
        self.assertEqual((ctx.exception.message, ctx.exception.hint, ctx.exception.exit_code),
                         (error["message"], "check that it fits", 3))
        self.assertEqual(ctx.exception.result.status, "nothing_fits")


def stand_in_lightning() -> dict[str, types.ModuleType]:
    """The modules batchfit.lightning imports, as Lightning has them: a
    Callback base, rank-zero logging and the lightning_*attr helpers with
    Lightning's rules (the module, its hparams, the datamodule and its
    hparams; getattr reads the last holder, setattr sets each).
    Lightning is not installed where these tests run."""
    def holders(model, name):
        found = []
        if hasattr(model, name):
            found.append(model)
        if hasattr(model, "hparams") and name in model.hparams:
            found.append(model.hparams)
        dm = getattr(getattr(model, "_trainer", None), "datamodule", None)
        if dm is not None:
            if hasattr(dm, name):
                found.append(dm)
            if hasattr(dm, "hparams") and name in dm.hparams:
                found.append(dm.hparams)
        return found

    def getattr_(model, name):
        h = holders(model, name)[-1]
        return h[name] if isinstance(h, dict) else getattr(h, name)

    def setattr_(model, name, value):
        for h in holders(model, name):
            if isinstance(h, dict):
                h[name] = value
            else:
                setattr(h, name, value)

    mods = {n: types.ModuleType(n) for n in ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks",
                                              "lightning.pytorch.utilities", "lightning.pytorch.utilities.parsing")}
    mods["lightning.pytorch.callbacks"].Callback = type("Callback", (), {})
    mods["lightning.pytorch.utilities"].rank_zero_info = lambda msg: print(msg, file=sys.stderr)
    mods["lightning.pytorch.utilities"].rank_zero_warn = lambda msg: print(msg, file=sys.stderr)
    parsing = mods["lightning.pytorch.utilities.parsing"]
    parsing.lightning_hasattr = lambda m, n: bool(holders(m, n))
    parsing.lightning_getattr = getattr_
    parsing.lightning_setattr = setattr_
    return mods


class LightningTest(unittest.TestCase):
    """batchfit.lightning.BatchFit against stand-in Lightning modules: what
    it does with Lightning's helpers, not Lightning itself."""

    def setUp(self):
        patcher = mock.patch.dict(sys.modules, stand_in_lightning())
        patcher.start()
        self.addCleanup(patcher.stop)
        sys.modules.pop("batchfit.lightning", None)
        self.addCleanup(sys.modules.pop, "batchfit.lightning", None)
        from batchfit import lightning

        self.lightning = lightning

    def test_in_a_trial(self):
        dm = types.SimpleNamespace(batch_size=32, hparams={"batch_size": 32})
        module = types.SimpleNamespace(hparams={}, _trainer=types.SimpleNamespace(datamodule=dm))
        with mock.patch.dict(os.environ, {**TRIAL, **NO_BINARY}):
            callback = self.lightning.BatchFit(memory_limit="24GiB")
        self.assertEqual(callback.batch_size, 12)
        with redirect_stderr(io.StringIO()):
            callback.setup(None, module, "validate")
            self.assertEqual(dm.batch_size, 32, "set for fit only")
            callback.setup(None, module, "fit")
        self.assertEqual((dm.batch_size, dm.hparams["batch_size"]), (12, 12))

    def test_searches_when_made(self):
        fake = FakeBinary(self, stdout=envelope())
        module = types.SimpleNamespace(bs=8, _trainer=None)
        with outside_trial(), redirect_stderr(io.StringIO()) as err:
            callback = self.lightning.BatchFit("bs", memory_limit="24GiB")
            self.assertIn("--memory-limit=24GiB", fake.argv)
            callback.setup(None, module, "fit")
        self.assertEqual(module.bs, 282)
        self.assertIn("batchfit: bs 8 -> 282 (batchfit)", err.getvalue())

    def test_no_attribute(self):
        with mock.patch.dict(os.environ, TRIAL):
            callback = self.lightning.BatchFit()
        with self.assertRaises(AttributeError) as ctx:
            callback.setup(None, types.SimpleNamespace(_trainer=None), "fit")
        self.assertIn("pass batch_arg_name=", str(ctx.exception))

    def test_result_callback_shares_the_setting(self):
        module = types.SimpleNamespace(batch_size=8, _trainer=None)
        trainer = types.SimpleNamespace(strategy=types.SimpleNamespace(root_device=types.SimpleNamespace(type="cpu")))
        run = {**RUN, "command": [sys.executable, *sys.argv], "dir": os.getcwd()}
        callback = self.lightning.BatchSizeFromBatchfit(json.loads(json.dumps(run)))
        with mock.patch.object(self.lightning.apply, "check", return_value=[]), redirect_stderr(io.StringIO()):
            callback.setup(trainer, module, "fit")
        self.assertEqual(module.batch_size, 282)


if __name__ == "__main__":
    unittest.main()
