"""batchfit's start-up hook for a trial process.

batchfit puts this file's directory first on the trial's PYTHONPATH, so Python
runs it at start-up. It stays tiny: the report logic lives in batchfit.hook
(batchfit._runtime), imported only when BATCHFIT_REPORT names a report file.
Then it runs the sitecustomize that would have run without batchfit (the
user's or the distribution's), so the program behaves as it would on its own.
"""


def _batchfit_install() -> None:
    import os

    if not os.environ.get("BATCHFIT_REPORT"):
        return
    try:
        from batchfit import hook

        hook.install()
    except Exception:
        # The trial must run even if the report cannot be made.
        pass


def _batchfit_chain() -> None:
    import os
    import sys

    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))

    def ours(entry: str) -> bool:
        try:
            return os.path.realpath(entry or os.curdir) == here
        except Exception:
            return False

    removed = [(i, p) for i, p in enumerate(sys.path) if ours(p)]
    me = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if not ours(p)]
    found = False
    try:
        try:
            __import__("sitecustomize")
            found = True
        except ImportError as e:
            if e.name != "sitecustomize":
                raise
    finally:
        # Put our entries back where they were, keeping whatever the other
        # sitecustomize added. The import machinery reads sys.modules after
        # this module runs, so it must hold a module named sitecustomize.
        for i, p in removed:
            sys.path.insert(min(i, len(sys.path)), p)
        if not found and "sitecustomize" not in sys.modules and me is not None:
            sys.modules["sitecustomize"] = me


_batchfit_install()
_batchfit_chain()
