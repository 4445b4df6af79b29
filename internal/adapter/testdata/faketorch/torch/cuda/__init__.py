import os

import torch

OutOfMemoryError = torch.OutOfMemoryError
synchronized = 0
_initialized = os.environ.get("FAKE_CUDA") == "1"
_queued_calls = []


class _Properties(object):
    total_memory = 150109880320


def is_initialized():
    return _initialized


def _lazy_call(callable, **kwargs):
    if is_initialized():
        callable()
    else:
        _queued_calls.append(callable)


def init():
    global _initialized
    if _initialized:
        return
    _initialized = True
    for call in _queued_calls:
        call()


def fake_alloc(nbytes, device=1, caught_inside=False):
    """An allocation the caching allocator refuses: the observers hear of
    it, then the OOM reaches Python, unless torch's C++ catches it itself
    (caught_inside), as cuDNN's workspace search does."""
    for observer in torch._C._oom_observers:
        observer(device, nbytes, 24 << 30, 1 << 20)
    if not caught_inside:
        raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {nbytes >> 20} MiB")


def is_available():
    return is_initialized()


def current_device():
    return 1


def synchronize():
    global synchronized
    synchronized += 1


def max_memory_allocated(device=None):
    return 25542543872 if device in (None, 1) else 0


def max_memory_reserved(device=None):
    return 25767706624 if device in (None, 1) else 0


def get_device_name(device=None):
    return "Fake H200"


def get_device_properties(device=None):
    return _Properties()
