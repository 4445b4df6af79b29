import os

import torch

OutOfMemoryError = torch.OutOfMemoryError
synchronized = 0


class _Properties(object):
    total_memory = 150109880320


def is_initialized():
    return os.environ.get("FAKE_CUDA") == "1"


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
