# A stand-in for torch 2.x with the few attributes the hook uses, so that the
# hook's GPU and torch>=2 paths run on a machine without either. FAKE_CUDA=1
# makes CUDA look initialized from the start; torch.cuda.init() initializes
# it later, as the program's first CUDA call would.
__version__ = "2.99.0+fake"


class OutOfMemoryError(RuntimeError):
    pass


from torch import _C  # noqa: E402
from torch import cuda  # noqa: E402
from torch import optim  # noqa: E402
