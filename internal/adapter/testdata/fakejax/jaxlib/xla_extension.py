# A stand-in for jaxlib's compiled extension: its runtime error class, which
# the real jaxlib creates in C++ (a mutable heap type, like this one).


class XlaRuntimeError(RuntimeError):
    pass
