"""Trials for the worker tests, on CPU torch. Behaviour is set through the
environment so that one file serves every test:

TRIAL_OOM_ABOVE  sizes above this raise torch.cuda.OutOfMemoryError from a
                 frame that holds the batch and the forward's graph
TRIAL_HANG_AT    a step at this size sleeps forever
TRIAL_DIE_AT     a step at this size ends the process (os._exit(3))
TRIAL_ERROR_AT   a step at this size raises KeyError
TRIAL_RETRY_AT   see Careless

A step at size 777 checks that no tensor of an earlier step is alive (weak
references to every batch, output and loss the steps made) and raises
AssertionError naming the survivors if one is.
"""

import os
import sys
import time
import weakref

import torch

REFS = []  # (what, weakref) of every tensor a step made
CHECK = 777


def env_int(name):
    v = os.environ.get(name)
    return int(v) if v else None


def check_refs(allowed=()):
    alive = [what for what, r in REFS if r() is not None and what not in allowed]
    if alive:
        raise AssertionError("alive after reset: %s" % ", ".join(alive))


class Clean(object):
    """A small model, trained properly."""

    keeps = ()

    def setup(self):
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.oom_above = env_int("TRIAL_OOM_ABOVE")

    def step(self, batch_size):
        if batch_size == CHECK:
            check_refs(self.keeps)
            return
        if batch_size == env_int("TRIAL_HANG_AT"):
            time.sleep(3600)
        if batch_size == env_int("TRIAL_DIE_AT"):
            sys.stderr.write("trials.py: dying on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        if batch_size == env_int("TRIAL_ERROR_AT"):
            raise KeyError("no such column: 'label'")
        x = torch.randn(batch_size, 16)
        REFS.append(("batch %d" % batch_size, weakref.ref(x)))
        self.forward_backward(x)

    def forward_backward(self, x):
        out = self.model(x)
        loss = out.pow(2).mean()
        REFS.append(("output %d" % x.shape[0], weakref.ref(out)))
        REFS.append(("loss %d" % x.shape[0], weakref.ref(loss)))
        if self.oom_above is not None and x.shape[0] > self.oom_above:
            # Where a real OOM would strike: the graph of this step is alive
            # in this frame and its callers.
            raise torch.cuda.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB (simulated on the CPU)")
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss


class Careless(Clean):
    """On an out-of-memory error it keeps the exception, as code that logs it
    later would (its traceback holds the failed step's frames), and re-raises
    it; at TRIAL_RETRY_AT it retries at half the size inside the except
    block instead, as an in-process search does. The worker clears the
    frames of an exception that reaches it; one the step swallowed it never
    sees, so then the failed step's tensors stay alive."""

    def step(self, batch_size):
        try:
            Clean.step(self, batch_size)
        except RuntimeError as e:
            self.last_error = e
            if batch_size != env_int("TRIAL_RETRY_AT"):
                raise
            Clean.step(self, max(batch_size // 2, 1))


class KeepsFailedBatch(Clean):
    """Keeps the batch of a failed step on self: a real leak."""

    keeps = ()

    def step(self, batch_size):
        if batch_size == CHECK:
            check_refs()
            return
        x = torch.randn(batch_size, 16)
        REFS.append(("batch %d" % batch_size, weakref.ref(x)))
        try:
            self.forward_backward(x)
        except RuntimeError:
            self.failed_batch = x
            raise


class Lazy(Clean):
    """Builds its optimizer's state only on the first real step (run it with
    BATCHFIT_WORKER_WARMUP=0)."""


class Noisy(Clean):
    """Prints to stdout and stderr: they belong to the Trial, not to the
    protocol."""

    def step(self, batch_size):
        print('{"type": "result", "id": 1, "outcome": "ok"}')
        sys.stdout.flush()
        sys.stderr.write("noisy stderr\n")
        Clean.step(self, batch_size)


# Module-level form: setup() and step(state, batch_size).
def setup():
    model = torch.nn.Linear(8, 2)
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}


def step(state, batch_size):
    loss = state["model"](torch.randn(batch_size, 8)).sum()
    state["opt"].zero_grad()
    loss.backward()
    state["opt"].step()
