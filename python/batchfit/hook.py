"""batchfit's in-trial hook, under its public name: the adapter's
sitecustomize imports it, and so may a program that installs the hook itself
(``from batchfit import hook; hook.install()``). The code lives in
batchfit._runtime.hook."""

from batchfit._runtime.hook import *  # noqa: F403  (the public names, as __all__ lists them)
from batchfit._runtime.hook import __all__ as __all__
