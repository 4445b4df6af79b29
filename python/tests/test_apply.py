"""batchfit.apply: reading a result and refusing one that does not stand for
the run. Standard library only; run with python3 -m unittest discover -s tests."""

import hashlib
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from batchfit import apply  # noqa: E402

GIB = 2**30


def sha(path):
    with open(path, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()


class ApplyTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.script = os.path.join(self.dir, "train.py")
        with open(self.script, "w") as f:
            f.write("print('train')\n")
        self.conf = os.path.join(self.dir, "conf.yaml")
        with open(self.conf, "w") as f:
            f.write("lr: 1\n")
        self.run = {
            "id": "r1", "status": "found", "answer": 282, "first_failure": 283, "margin_size": 270,
            "command": ["python3", "train.py", "fit", "--data.batch_size", "{}", "--config=conf.yaml"],
            "dir": self.dir, "trials": [],
            "settings": {"memory_limit_bytes": 0},
            "gpu": {"devices": [{"name": "NVIDIA H200", "total_bytes": 141 * GIB}]},
            "inputs": {"files": [{"path": "train.py", "hash": sha(self.script)},
                                 {"path": "conf.yaml", "hash": sha(self.conf)}],
                       "loaded": [{"path": self.script, "hash": sha(self.script)}],
                       "env": ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]},
        }
        self.argv = [self.script, "fit", "--data.batch_size", "64", "--config=conf.yaml"]
        self.env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "HOME": "/root"}

    def check(self, **kw):
        args = dict(argv=self.argv, device=("NVIDIA H200", 141 * GIB), env=self.env)
        args.update(kw)
        return apply.check(self.run, **args)

    def refused(self, fragment, **kw):
        with self.assertRaises(apply.ResultMismatch) as cm:
            self.check(**kw)
        self.assertIn(fragment, str(cm.exception))
        return str(cm.exception)

    def test_matching_run(self):
        self.assertEqual(self.check(), [])
        self.assertEqual(apply.batch_size(self.run), 282)
        self.assertEqual(apply.batch_size(self.run, "margin"), 270)

    def test_load_envelope_bare_run_and_errors(self):
        path = os.path.join(self.dir, "r.json")
        with open(path, "w") as f:
            json.dump({"schema_version": 1, "runs": [self.run], "error": None}, f)
        self.assertEqual(apply.load(path)["answer"], 282)
        with open(path, "w") as f:
            json.dump(self.run, f)
        self.assertEqual(apply.load(path)["answer"], 282)
        with open(path, "w") as f:
            json.dump({"schema_version": 1, "runs": [], "error": {"message": "no GPU found"}}, f)
        with self.assertRaisesRegex(apply.ResultMismatch, "no GPU found"):
            apply.load(path)
        with self.assertRaisesRegex(apply.ResultMismatch, "no such file"):
            apply.load(os.path.join(self.dir, "missing.json"))
        with open(path, "w") as f:
            f.write("batchfit: error: nope\n")
        with self.assertRaisesRegex(apply.ResultMismatch, "not batchfit JSON"):
            apply.load(path)

    def test_arguments(self):
        callback = ["--trainer.callbacks+=batchfit.lightning.BatchSizeFromBatchfit",
                    "--trainer.callbacks.init_args.result", "r.json", "--batchfit_result=r.json"]
        self.assertEqual(self.check(argv=self.argv + callback), [])
        notes = self.check(argv=self.argv + ["--model.arch", "resnet34"] + callback)
        self.assertEqual(notes, ["arguments not in the search: --model.arch resnet34 (if they change memory use, search again)"])
        self.refused("'--config=conf.yaml'", argv=self.argv[:-1])
        self.refused("'fit'", argv=[self.script, "validate", "--data.batch_size", "64", "--config=conf.yaml"])
        self.refused("the search ran train.py", argv=["/elsewhere/train.py"] + self.argv[1:])

    def test_edited_files(self):
        with open(self.conf, "w") as f:
            f.write("lr: 2\n")
        self.refused("conf.yaml changed")
        os.remove(self.conf)
        self.refused("conf.yaml is gone")

    def test_environment(self):
        self.refused("PYTORCH_CUDA_ALLOC_CONF was", env={"HOME": "/root"})
        self.refused("XLA_FLAGS is set now", env=dict(self.env, XLA_FLAGS="--x"))
        self.assertEqual(self.check(env=dict(self.env, CUDA_VISIBLE_DEVICES="1", BATCHFIT_X="1")), [])

    def test_launch_environment(self):
        # A variable set in the running process after it started (as
        # Lightning sets PYTORCH_NVML_BASED_CUDA_CHECK at import) is not
        # the environment it was launched with.
        os.environ["PYTORCH_BATCHFIT_TEST_LATE"] = "1"
        try:
            self.assertNotIn("PYTORCH_BATCHFIT_TEST_LATE", apply.launch_environ())
        finally:
            del os.environ["PYTORCH_BATCHFIT_TEST_LATE"]
        self.assertEqual(apply.launch_environ().get("PATH"), os.environ.get("PATH"))

    def test_gpu(self):
        self.refused("measured on NVIDIA H200", device=("NVIDIA L4", 22.5 * GIB))
        self.assertEqual(self.check(device=None), [])
        self.run["settings"]["memory_limit_bytes"] = 24 * GIB
        self.refused("card of 24.00 GiB", device=("NVIDIA L4", 22.5 * GIB))
        notes = self.check(device=("NVIDIA RTX 4090", 24 * GIB))
        self.assertTrue(any("kernels" in n for n in notes), notes)
        notes = self.check()
        self.assertTrue(any("not the largest" in n for n in notes), notes)

    def test_force_and_unusable_results(self):
        self.run["simulated"] = True
        self.refused("simulated GPU")
        self.assertTrue(any("simulated" in n for n in self.check(force=True)))
        self.run.update(simulated=False, status="nothing_fits", answer=0)
        self.refused("did not find an answer")
        with self.assertRaisesRegex(apply.ResultMismatch, "no answer"):
            apply.batch_size(self.run)
        with self.assertRaises(ValueError):
            apply.batch_size(self.run, "largest")


if __name__ == "__main__":
    unittest.main()
