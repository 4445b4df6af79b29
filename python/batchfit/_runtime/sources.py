"""What a trial's answer depends on: the source files the program loaded,
the files it opened for reading, and the third-party packages it imported
(what batchfit's fork server may preload)."""

from __future__ import annotations

import os
import stat
import sys
from typing import Any, Collection

from batchfit._runtime.state import state

_MAX_SOURCES = 1000
# Files opened for reading (opened_files): a config file is small and read
# early, a data set large or many files, so only the first _MAX_OPENED
# files of at most _MAX_OPENED_BYTES each are reported, and the data the
# program streams past them is left out; _MAX_OPEN_SEEN bounds the paths
# remembered before the exit filters them. internal/adapter MaxOpened
# keeps the same count.
_MAX_OPENED = 100
_MAX_OPENED_BYTES = 1 << 20
_MAX_OPEN_SEEN = 1000
# batchfit's package folder (this module's parent's parent): the adapter's
# own files are never the program's sources or inputs.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_watching = False  # watch_opens has added its hook: once a process


def watch_opens() -> None:
    """Remember the files the program opens for reading, through the "open"
    audit event (open(), io.open, os.open, io.open_code), leaving out what
    is no input of the program's own: the standard library, site-packages
    and dist-packages, compiled modules (__pycache__), the kernels torch's
    compilers cache (torchinductor_USER, .triton: later runs rewrite them
    as they like, and the history would never answer again), batchfit's
    package (the adapter), /dev, /proc and /sys. The trial's log folder is
    not left out, as --log-dir may be the program's own folder; batchfit's
    report there is opened to append, never to read. An audit hook cannot
    be removed, so it is added once a process, stays a string test for
    every other event, and stops remembering after _MAX_OPEN_SEEN paths."""
    global _watching
    add_hook = getattr(sys, "addaudithook", None)  # Python 3.8 and later
    if add_hook is None or _watching:
        return
    _watching = True
    stdlib = os.path.dirname(os.path.abspath(os.__file__))
    prefixes = tuple(p + os.sep for p in (stdlib, _PACKAGE, "/dev", "/proc", "/sys"))
    parts = tuple(os.sep + p + os.sep for p in ("site-packages", "dist-packages", "__pycache__", ".triton"))
    parts += (os.sep + "torchinductor_",)
    seen = state.opened
    accmode, rdonly = os.O_ACCMODE, os.O_RDONLY

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or len(seen) >= _MAX_OPEN_SEEN:
            return
        try:
            path, _, flags = args
            if isinstance(path, int) or (isinstance(flags, int) and flags & accmode != rdonly):
                return  # an open file descriptor, or a file to write
            path = os.path.abspath(os.fsdecode(path))
            if path.startswith(prefixes) or any(p in path for p in parts):
                return
            seen[path] = None
        except Exception:
            pass

    add_hook(audit)


def script() -> str | None:
    """The script Python runs, made absolute while the working directory is
    still the one it was named from. Python deletes __main__.__file__ once
    the script has run, before atexit handlers."""
    try:
        first = sys.argv[0]
    except (AttributeError, IndexError):
        return None
    if not first or first == "-c" or first == "-m" or first == "-":
        return None
    return os.path.abspath(first)


def third_party_packages() -> list[str]:
    """The top-level packages this process imported from site-packages or
    dist-packages, in the order they were first imported: what batchfit's
    fork server may preload. Never the program's own modules, the standard
    library or batchfit's."""
    out: list[str] = []
    seen: set[str] = set()
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        if top in seen or top in ("batchfit", "sitecustomize", "usercustomize"):
            continue
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path:
            continue
        if is_third_party(path):
            seen.add(top)
            out.append(top)
            if len(out) >= _MAX_SOURCES:
                break
    return out


def is_third_party(path: str) -> bool:
    """Whether the file at path belongs to an installed third-party package:
    it lies under a site-packages or dist-packages directory."""
    parts = os.path.abspath(path).split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def loaded_sources() -> tuple[list[dict[str, Any]], bool]:
    """The source files this process loaded outside the standard library,
    site-packages, dist-packages and batchfit's own adapter, as
    ([{"path", "size", "mtime_ns"}], truncated): the script first, then by
    path, at most _MAX_SOURCES. They are only stat'ed: batchfit hashes them,
    so the program's exit stays cheap."""
    stdlib = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
    ours = _PACKAGE + os.sep
    paths = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path:
            paths.add(os.path.abspath(path))
    ordered = sorted(paths)
    main = getattr(sys.modules.get("__main__"), "__file__", None) or state.script
    if isinstance(main, str):
        main = os.path.abspath(main)
        if main in paths:
            ordered.remove(main)
        ordered.insert(0, main)
    out: list[dict[str, Any]] = []
    for path in ordered:
        if path.startswith(stdlib) or path.startswith(ours):
            continue
        if is_third_party(path):
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if len(out) >= _MAX_SOURCES:
            return out, True
        out.append({"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out, False


def opened_files(loaded: Collection[str]) -> list[dict[str, Any]]:
    """The files this process opened for reading (see watch_opens), less
    the sources it loaded (loaded: their paths), as [{"path", "size",
    "mtime_ns"}] in the order first opened: regular files of at most
    _MAX_OPENED_BYTES, the first _MAX_OPENED of them. Like the sources they
    are only stat'ed; batchfit hashes them."""
    out: list[dict[str, Any]] = []
    for path in list(state.opened):
        if path in loaded:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_OPENED_BYTES:
            continue
        out.append({"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
        if len(out) >= _MAX_OPENED:
            break
    return out
