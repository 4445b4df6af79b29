"""A Trial with the mistakes `batchfit doctor` exists to find.

    batchfit doctor -- python -m batchfit.worker examples/worker/leaky_trial.py:Trial

Two mistakes, both common:

1. The step keeps its loss as a tensor in a list (self.losses.append(loss))
   instead of a number (loss.item()). Every step leaves a tensor behind, and
   before backward each one would hold its whole autograd graph.
2. When a step runs out of memory, it keeps the batch that failed on self
   ("to look at later") and re-raises. This is the in-process search's mistake
   in another form: the failed trial's input stays allocated, so every later
   trial has that much less memory; in a search that retries inside
   `except RuntimeError` the live exception's traceback holds it, here an attribute does.

Each time it keeps something it says how many bytes on stderr, computed from
the tensors' sizes, so that doctor's figures (torch's allocator counters)
can be checked against it.

The model is a small convolutional network whose activations grow quickly
with the batch, so that doubling the batch size soon runs out of memory. On
a machine without CUDA it trains on the CPU and simulates the out-of-memory
error (torch.cuda.OutOfMemoryError) above LEAKY_CPU_OOM_ABOVE (default 64).

Environment: LEAKY_IMAGE_SIZE (224 with CUDA, 32 without), LEAKY_CHANNELS
(64 with CUDA, 16 without), LEAKY_CPU_OOM_ABOVE.
"""

import os
import sys

import torch
import torch.nn.functional as F


def _env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


def _bytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


class Trial(object):
    def setup(self):
        torch.manual_seed(0)
        self.cuda = torch.cuda.is_available()
        self.device = "cuda" if self.cuda else "cpu"
        self.image_size = _env_int("LEAKY_IMAGE_SIZE", 224 if self.cuda else 32)
        channels = _env_int("LEAKY_CHANNELS", 64 if self.cuda else 16)
        self.cpu_oom_above = _env_int("LEAKY_CPU_OOM_ABOVE", 64)
        self.model = torch.nn.Sequential(
            torch.nn.Conv2d(3, channels, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(channels, channels, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(channels, channels, 3, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            torch.nn.Linear(channels, 10),
        ).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.losses = []          # mistake 1: loss tensors, not numbers
        self.failed_batch = None  # mistake 2: the batch of the step that failed

    def forward(self, x):
        h = self.model[0](x)
        if not self.cuda and x.shape[0] > self.cpu_oom_above:
            raise torch.cuda.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate %d bytes (simulated: this machine has no CUDA)" % (x.numel() * 64))
        for layer in self.model[1:]:
            h = layer(h)
        return h

    def step(self, batch_size):
        x = torch.randn(batch_size, 3, self.image_size, self.image_size, device=self.device)
        y = torch.randint(0, 10, (batch_size,), device=self.device)
        try:
            loss = F.cross_entropy(self.forward(x), y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        except RuntimeError:
            self.failed_batch = (x, y)
            sys.stderr.write("leaky_trial: keeping the failed batch of %d: %d bytes\n" % (batch_size, _bytes(x, y)))
            sys.stderr.flush()
            raise
        self.losses.append(loss)
        sys.stderr.write("leaky_trial: keeping %d loss tensors: %d bytes\n" % (len(self.losses), _bytes(*self.losses)))
        sys.stderr.flush()
