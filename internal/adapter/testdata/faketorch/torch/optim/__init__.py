from .optimizer import Optimizer

# As torch 2 does: the submodule is reachable only through sys.modules.
del optimizer
