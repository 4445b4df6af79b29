# The eager context, as TensorFlow 2 keeps it: physical devices can be
# listed and configured until the first op creates the logical devices, after
# which their configuration is fixed.
import os
from collections import namedtuple

PhysicalDevice = namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = namedtuple("LogicalDevice", ["name", "device_type"])

_context = None


class Context:
    def __init__(self):
        n = int(os.environ.get("FAKE_TF_GPUS", "1"))
        self.physical = [PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(n)]
        self.virtual = {}  # physical device -> [LogicalDeviceConfiguration]
        self.growth = {}
        self._initialized = False
        self.limits = []  # bytes per logical device, fixed at initialisation
        self.in_use = []
        self.peak = []

    def ensure_initialized(self):
        if self._initialized:
            return
        total = int(os.environ.get("FAKE_TF_TOTAL", str(1 << 30)))
        for dev in self.physical:
            configs = self.virtual.get(dev)
            limit = configs[0].memory_limit << 20 if configs else total
            self.limits.append(limit)
            self.in_use.append(0)
            self.peak.append(0)
            print(f"created {dev.name} with a limit of {limit >> 20} MiB")
        self._initialized = True

    def set_logical_device_configuration(self, dev, configs):
        if self._initialized:
            raise RuntimeError("Virtual devices cannot be modified after being initialized")
        if dev in self.growth:
            raise ValueError("Cannot set memory growth on device when virtual devices configured")
        self.virtual[dev] = configs

    def set_memory_growth(self, dev, enable):
        if dev in self.virtual:
            raise ValueError("Cannot set memory growth on device when virtual devices configured")
        self.growth[dev] = enable


def context():
    global _context
    if _context is None:
        _context = Context()
    return _context


def context_safe():
    return _context
