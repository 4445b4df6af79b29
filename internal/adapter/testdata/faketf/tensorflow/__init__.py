# A stand-in for TensorFlow 2 with the few things batchfit's hook uses:
# tf.config's device listing, logical device configuration and memory info,
# and ResourceExhaustedError ("OOM when allocating tensor ...") when an
# allocation does not fit the device. Devices are created by the first
# allocation, as by the first op.
import types

from tensorflow.python.eager import context as _context
from tensorflow.python.framework import errors_impl as _errors_impl

errors = types.SimpleNamespace(ResourceExhaustedError=_errors_impl.ResourceExhaustedError)


class LogicalDeviceConfiguration:
    def __init__(self, memory_limit=None):
        self.memory_limit = memory_limit


def _list_physical_devices(device_type=None):
    return [d for d in _context.context().physical if device_type in (None, d.device_type)]


def _list_logical_devices(device_type=None):
    ctx = _context.context()
    ctx.ensure_initialized()
    return [_context.LogicalDevice(f"/device:GPU:{i}", "GPU") for i in range(len(ctx.limits))]


def _get_memory_info(device):
    ctx = _context.context()
    ctx.ensure_initialized()
    i = int(device.rsplit(":", 1)[1])
    return {"current": ctx.in_use[i], "peak": ctx.peak[i]}


def _set_memory_growth(dev, enable):
    _context.context().set_memory_growth(dev, enable)


config = types.SimpleNamespace(
    LogicalDeviceConfiguration=LogicalDeviceConfiguration,
    list_physical_devices=_list_physical_devices,
    list_logical_devices=_list_logical_devices,
    set_logical_device_configuration=lambda dev, configs: _context.context().set_logical_device_configuration(dev, configs),
    get_logical_device_configuration=lambda dev: _context.context().virtual.get(dev),
    experimental=types.SimpleNamespace(get_memory_info=_get_memory_info, set_memory_growth=_set_memory_growth),
)


def allocate(shape, device=0):
    """Hold a float tensor of shape on GPU:device for the rest of the program."""
    ctx = _context.context()
    ctx.ensure_initialized()
    nbytes = 4
    for d in shape:
        nbytes *= d
    if ctx.in_use[device] + nbytes > ctx.limits[device]:
        dims = ",".join(str(d) for d in shape)
        raise errors.ResourceExhaustedError(
            None, None,
            f"OOM when allocating tensor with shape[{dims}] and type float on "
            f"/job:localhost/replica:0/task:0/device:GPU:{device} by allocator GPU_{device}_bfc",
        )
    ctx.in_use[device] += nbytes
    ctx.peak[device] = max(ctx.peak[device], ctx.in_use[device])
