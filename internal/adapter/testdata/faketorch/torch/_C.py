# The compiled part of torch, as far as the hook uses it: the caching
# allocator's out-of-memory observers. Attaching one initialises CUDA in
# real torch, so the stand-in notes when that happens too early.
_oom_observers = []
attached_before_init = False


def _cuda_attach_out_of_memory_observer(observer):
    global attached_before_init
    from torch import cuda

    if not cuda.is_initialized():
        attached_before_init = True
    _oom_observers.append(observer)
