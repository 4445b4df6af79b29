"""Where the batchfit binary is, for ``python -m batchfit`` and the Python API.

The wheel ships the binary as a script (``batchfit-VER.data/scripts/batchfit``),
which pip installs into the scripts folder of wherever it installs the package:
``venv/bin``, ``~/.local/bin`` with ``--user``, ``DIR/bin`` with ``--target DIR``,
``PREFIX/bin`` with ``--prefix``. The one record of where that was is the
distribution's RECORD, which pip writes as it installs, so the binary is looked
up there first; the scripts folders sysconfig names (as ruff's ``__main__``
does) and the folder beside the package come next, for an installer that wrote
no RECORD. A copy inside the package would be found without any of this, but
would put the binary twice into every install (it is most of the wheel) or
leave the ``batchfit`` command a Python wrapper in front of it.
"""

from __future__ import annotations

import os
import shutil
import sysconfig

#: Names a binary to use instead of the shipped one, e.g. a local Go build.
ENV = "BATCHFIT_BINARY"

_NAME = "batchfit"


def find() -> str:
    """The batchfit binary: $BATCHFIT_BINARY, else the one the wheel
    installed, else ``batchfit`` on PATH. Raises FileNotFoundError, with what
    to do, when there is none."""
    named = os.environ.get(ENV)
    if named:
        if _executable(named):
            return named
        raise FileNotFoundError(f"${ENV} is {named!r}, which is not an executable file")
    shipped = installed()
    if shipped:
        return shipped
    on_path = shutil.which(_NAME)
    if on_path:
        return on_path
    raise FileNotFoundError(
        "no batchfit binary: install batchfit's wheel for this platform (pip install batchfit-*.whl), "
        f"put batchfit on PATH (go install github.com/batchfit/batchfit/cmd/batchfit@latest), or set ${ENV}"
    )


def installed() -> str | None:
    """The binary the batchfit wheel installed, or None."""
    for candidate in _recorded() + _script_dirs():
        if _executable(candidate):
            return candidate
    return None


def _recorded() -> list[str]:
    try:
        from importlib import metadata

        dist = metadata.distribution(_NAME)
        files = dist.files or []
    except Exception:  # not installed, or metadata unreadable: look elsewhere
        return []
    return [
        os.path.normpath(str(dist.locate_file(f)))
        for f in files
        if f.name == _NAME and f.parent.name in ("bin", "Scripts")
    ]


def _script_dirs() -> list[str]:
    dirs = [sysconfig.get_path("scripts")]
    try:
        dirs.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    # pip install --target DIR puts the package in DIR and scripts in DIR/bin.
    dirs.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin"))
    return [os.path.join(d, _NAME) for d in dirs if d]


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
