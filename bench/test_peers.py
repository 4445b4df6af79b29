"""bench/peers.py without a GPU: the truth from plain runs, the errors and
the table, the parsing of batchfit's and the peers' output, the peer runners
against stand-ins for Lightning, Accelerate and transformers that run out of
memory above a size (FAKE_LIMIT), and a whole comparison with a stand-in
batchfit and no card held. The stand-ins copy the finders' search rules
(binsearch from init_val, Accelerate's factor of 0.9), not their code.
The runners' tests need torch and torchvision (the SimCLR module trains a
step on the CPU); run from the repository root:

    python3 -m unittest discover -s bench -p 'test_*.py'
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peers  # noqa: E402

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
except ImportError:
    torch = None

OOM = 'RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")'

FAKES = {
    "lightning/__init__.py": f"""
        import os
        import torch

        def limit():
            return int(os.environ["FAKE_LIMIT"])

        def seed_everything(seed):
            return seed

        class LightningModule(torch.nn.Module):
            def save_hyperparameters(self):
                pass

        class LightningDataModule:
            def save_hyperparameters(self):
                pass

        class Trainer:
            def __init__(self, max_steps=-1, **kwargs):
                self.max_steps, self.kwargs = max_steps, kwargs

            def fit(self, model, datamodule=None):
                size = (datamodule or model).batch_size
                if size > limit():
                    raise {OOM}
                if datamodule is None:  # a module with its own loader: one real step on the CPU
                    batch = next(iter(model.train_dataloader()))
                    model.training_step(batch, 0).backward()
        """,
    "lightning/pytorch/__init__.py": "",
    "lightning/pytorch/cli.py": "LightningCLI = None\n",
    "lightning/pytorch/callbacks.py": """
        class BatchSizeFinder:
            def __init__(self, mode="power", steps_per_trial=3, init_val=2, max_trials=25, batch_arg_name="batch_size",
                         margin=0.05, max_val=8192):
                pass
        """,
    "lightning/pytorch/tuner/__init__.py": """
        from lightning.pytorch.tuner import batch_size_scaling

        class Tuner:
            def __init__(self, trainer):
                self.trainer = trainer

            def scale_batch_size(self, model, datamodule=None, mode="power", steps_per_trial=3, init_val=2,
                                 max_trials=25):
                assert mode == "binsearch" and steps_per_trial == 3
                return batch_size_scaling.binsearch(self.trainer, model, datamodule, init_val, 0.05)
        """,
    "lightning/pytorch/tuner/batch_size_scaling.py": """
        def _try_loop_run(trainer, params):
            trainer.fit(params["model"], datamodule=params["datamodule"])

        def _adjust_batch_size(holder, value, desc=None):
            holder.batch_size = value

        def binsearch(trainer, model, datamodule, size, margin):
            holder, params = datamodule or model, {"model": model, "datamodule": datamodule}
            low, high = 1, None
            holder.batch_size = size
            while True:
                try:
                    _try_loop_run(trainer, params)
                    low = holder.batch_size
                    if high:
                        if high - low <= 1:
                            break
                        _adjust_batch_size(holder, (high + low) // 2, desc="succeeded")
                    else:
                        _adjust_batch_size(holder, low * 2, desc="succeeded")
                except RuntimeError:
                    high = holder.batch_size
                    _adjust_batch_size(holder, (high + low) // 2, desc="failed")
                    if high - low <= 1:
                        break
            return int(holder.batch_size * (1 - margin))
        """,
    "accelerate/__init__.py": "",
    "accelerate/utils.py": """
        def find_executable_batch_size(function=None, starting_batch_size=128):
            if function is None:
                return lambda f: find_executable_batch_size(f, starting_batch_size)
            def run(*args, **kwargs):
                size = starting_batch_size
                while True:
                    try:
                        return function(size, *args, **kwargs)
                    except RuntimeError as e:
                        if "CUDA out of memory." not in str(e):
                            raise
                        size = int(size * 0.9)
            return run
        """,
    "transformers/__init__.py": f"""
        import dataclasses
        import sys

        from accelerate.utils import find_executable_batch_size

        def set_seed(seed):
            pass

        class LlamaConfig:
            def __init__(self, **kwargs):
                self.vocab_size = kwargs["vocab_size"]

        class LlamaForCausalLM:
            def __init__(self, config):
                pass

        @dataclasses.dataclass
        class TrainingArguments:
            per_device_train_batch_size: int = 8
            auto_find_batch_size: bool = False
            max_steps: int = -1
            seed: int = 42

        class HfArgumentParser:
            def __init__(self, types):
                self.types = types

            def parse_args_into_dataclasses(self):
                argv, args = sys.argv[1:], TrainingArguments()
                for flag, value in zip(argv, argv[1:] + [""]):
                    if flag == "--per_device_train_batch_size":
                        args.per_device_train_batch_size = int(value)
                    elif flag == "--max_steps":
                        args.max_steps = int(value)
                    elif flag == "--auto_find_batch_size":
                        args.auto_find_batch_size = value == "true"
                return [t() for t in self.types[:-1]] + [args]

        class State:
            train_batch_size = None

        class Trainer:
            def __init__(self, model, args, train_dataset, callbacks):
                self.args, self.state = args, State()
                self._train_batch_size = args.per_device_train_batch_size

            def _inner_training_loop(self, batch_size=None, args=None):
                self._train_batch_size = batch_size
                if batch_size > int(__import__("os").environ["FAKE_LIMIT"]):
                    raise {OOM}
                self.state.train_batch_size = batch_size
                return {{"train_loss": 1.0}}

            def train(self):
                assert self.args.auto_find_batch_size and self.args.max_steps == 3
                loop = find_executable_batch_size(self._inner_training_loop, self._train_batch_size)
                return type("Output", (), {{"metrics": loop(args=self.args)}})

            def log_metrics(self, split, metrics):
                print(split, metrics)
        """,
}


def write_fakes(root):
    for path, text in FAKES.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(textwrap.dedent(text))


class PureTest(unittest.TestCase):
    def test_boundary(self):
        self.assertEqual(peers.boundary({272: "ok", 273: "oom", 257: "ok", 258: "ok"}), (272, None, ""))
        self.assertEqual(peers.boundary({257: "ok", 258: "ok", 300: "oom"}), (None, (258, 300), "open"))
        self.assertEqual(peers.boundary({257: "ok", 258: "ok"})[2], "every size ran, up to 258")
        self.assertEqual(peers.boundary({257: "oom"})[2], "no size ran")
        self.assertIn("not monotone", peers.boundary({60: "oom", 61: "ok", 62: "oom"})[2])
        self.assertIn("58 crash", peers.boundary({58: "crash", 59: "oom"})[2])

    def test_error(self):
        self.assertEqual(peers.error(272, 272), "exact")
        self.assertEqual(peers.error(257, 272), "-5.5 %")
        self.assertEqual(peers.error(60, 58), "+3.4 %")
        self.assertEqual(peers.error(None, 58), "no answer")
        self.assertEqual(peers.error(57, None), "?")

    def test_parse_answer_takes_the_last_line(self):
        out = "Seed set to 0\npeers-answer {\"answer\": 1}\nnoise\npeers-answer {\"answer\": 2, \"trials\": []}\n"
        self.assertEqual(peers.parse_answer(out)["answer"], 2)
        self.assertIsNone(peers.parse_answer("Traceback ...\nCUDA out of memory"))

    def test_parse_batchfit(self):
        doc = {"runs": [{"answer": 58, "proof": "held", "trials": [{"batch_size": 8, "outcome": "ok"}]}]}
        self.assertEqual(peers.parse_batchfit(json.dumps(doc))["answer"], 58)
        self.assertEqual(peers.parse_batchfit("batchfit: error: no GPU"), {})
        self.assertEqual(peers.parse_batchfit('{"runs": []}'), {})

    def test_stored_truth(self):
        with open(peers.TRUTH) as f:
            doc = json.load(f)
        w = peers.workloads("/tmp/x")
        self.assertEqual(peers.stored_truth(doc, w["hf"], "24GiB"), (69, "zoo-truth.json hf/real-24GiB"))
        self.assertEqual(peers.stored_truth(doc, w["lightning"], "24GiB")[0], 1949)
        self.assertIsNone(peers.stored_truth(doc, w["simclr"], "24GiB")[0])
        self.assertIsNone(peers.stored_truth(doc, w["hf"], "16GiB")[0])

    def test_table(self):
        rs = [peers.Result("simclr", "batchfit", 272, 36.5, 8), peers.Result("simclr", "lightning", 257, 35.2, 17),
              peers.Result("simclr", "accelerate", None, 12.0, None, "no answer (exit 1)")]
        lines = peers.table(rs, {"simclr": (272, "checked here: 272 ran, 273 oom")})
        self.assertEqual(len(lines), 4)
        self.assertRegex(lines[1], r"^simclr +batchfit +272 +272 +exact +8 +36.5 +1.00  checked here")
        self.assertRegex(lines[2], r"lightning binsearch +257 +272 +-5.5 % +17 +35.2 +0.96 ")
        self.assertRegex(lines[3], r"accelerate +- +272 +no answer +- +12.0 +0.33 ")
        target = peers.target_lines(rs, {"simclr": (272, "")})
        self.assertEqual(target, ["simclr: batchfit's wall / lightning binsearch's 1.04 (target at most 0.7: NOT met); "
                                  "batchfit exact"])


@unittest.skipIf(torch is None, "the stand-in Lightning and the examples import torch and torchvision")
class RunnerTest(unittest.TestCase):
    """The runners as the comparison runs them: a process each, the answer
    on its own line."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        write_fakes(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def runner(self, *args, limit):
        env = dict(os.environ, PYTHONPATH=self.tmp.name, FAKE_LIMIT=str(limit), PEERS_T0="0")
        p = subprocess.run([sys.executable, os.path.join(HERE, "peers.py"), *args, "--out", self.tmp.name],
                           capture_output=True, text=True, env=env, cwd=os.path.dirname(HERE))
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = peers.parse_answer(p.stdout)
        self.assertIsNotNone(doc, p.stdout)
        self.assertGreater(doc["seconds"], 1e9)  # timed from PEERS_T0, the parent's clock
        return doc

    def test_lightning_on_the_lightning_example(self):
        doc = self.runner("run-lightning", "--workload", "lightning", "--init", "2", limit=1949)
        self.assertEqual(doc["largest_ran"], 1949)
        self.assertEqual(doc["answer"], int(1949 * 0.95))
        self.assertEqual(doc["margin"], 0.05)
        self.assertEqual(doc["trials"][:3], [[2, "ok"], [4, "ok"], [8, "ok"]])
        self.assertIn([2048, "oom"], doc["trials"])

    def test_accelerate_on_the_lightning_example(self):
        doc = self.runner("run-accelerate", "--workload", "lightning", "--start", "4096", limit=1949)
        self.assertEqual(doc["trials"][0], [4096, "oom"])
        self.assertEqual(doc["trials"][-1], [doc["answer"], "ok"])
        self.assertLessEqual(doc["answer"], 1949)

    def test_hf_on_the_hf_example(self):
        doc = self.runner("run-hf", "--workload", "hf", "--start", "64", limit=58)
        self.assertEqual(doc["trials"], [[64, "oom"], [57, "ok"]])
        self.assertEqual(doc["answer"], 57)

    def test_lightning_and_accelerate_on_simclr(self):
        # The real module, one step at a time on the CPU.
        doc = self.runner("run-lightning", "--workload", "simclr", "--init", "2", limit=3)
        self.assertEqual(doc["trials"], [[2, "ok"], [4, "oom"], [3, "ok"]])
        doc = self.runner("run-accelerate", "--workload", "simclr", "--start", "4", limit=3)
        self.assertEqual(doc["trials"], [[4, "oom"], [3, "ok"]])


@unittest.skipIf(torch is None, "the HF example imports torch")
class CompareTest(unittest.TestCase):
    """A whole comparison: a stand-in batchfit, the stand-in peers, no card
    held, and plain runs that run out of memory above a size."""

    def test_table_and_record(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_fakes(tmp)
            bf = os.path.join(tmp, "batchfit")
            with open(bf, "w") as f:
                f.write("#!/bin/sh\nsleep 1\necho '{\"runs\": [{\"answer\": 58, \"proof\": \"held\", \"seconds\": 1.5, "
                        "\"trials\": [{\"batch_size\": 8, \"outcome\": \"ok\"}, {\"batch_size\": 59, \"outcome\": "
                        "\"oom\"}, {\"batch_size\": 58, \"outcome\": \"ok\"}]}]}'\n")
            os.chmod(bf, 0o755)

            class Held:
                line = "held: nothing (a test)"

                def __init__(self, *args):
                    pass

                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    pass

            def plain(cmd, size, env, timeout):
                return ("ok" if size <= 58 else "oom"), 0.1, ""

            # A truth of the test's own, whatever bench/zoo-truth.json holds now.
            truth = os.path.join(tmp, "zoo-truth.json")
            with open(truth, "w") as f:
                json.dump({"hf/real-24GiB": {"answer": 58}}, f)
            out = os.path.join(tmp, "out")
            env = dict(os.environ, PYTHONPATH=tmp, FAKE_LIMIT="58")
            with mock.patch.object(peers, "HeldCard", Held), mock.patch.object(peers.card_check, "run", plain), \
                    mock.patch.object(peers, "TRUTH", truth), \
                    mock.patch.dict(os.environ, env), mock.patch("sys.stdout") as stdout:
                cwd = os.getcwd()
                try:
                    code = peers.main(["--batchfit", bf, "--out", out, "--workloads", "hf", "--check"])
                finally:
                    os.chdir(cwd)
            self.assertEqual(code, 0)
            with open(os.path.join(out, "table.txt")) as f:
                text = f.read()
            self.assertRegex(text, r"hf +batchfit +58 +58 +exact +3 ")
            self.assertRegex(text, r"hf +hf auto_find +57 +58 +-1.7 % +2 ")
            self.assertIn("checked here: 57 ran, 58 ran, 59 oom (as zoo-truth.json)", text)
            self.assertIn("hf: batchfit's wall / hf auto_find's", text)
            with open(os.path.join(out, "peers.json")) as f:
                rec = json.load(f)["workloads"]["hf"]
            self.assertEqual([c["size"] for c in rec["checks"]], [57, 58, 59])
            self.assertEqual(rec["truth"], 58)
            del stdout


if __name__ == "__main__":
    unittest.main()
