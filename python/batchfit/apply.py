"""Apply a batchfit result to a training run, and refuse when the result was
measured for something else.

The framework callbacks (batchfit.lightning, batchfit.hf) are thin layers
over this module, which imports only the standard library: it reads a run
record (a file written with `batchfit search --json`, or a run of the
history through `batchfit show RUN --json`), checks that it stands for what
runs now (the same script and the files it loaded, the same arguments but
the batch size, the same memory-relevant environment, a GPU it was measured
for) and says which batch size to use.

    run = batchfit.apply.load("batchfit.json")
    notes = batchfit.apply.check(run, argv=sys.argv, device=("NVIDIA H200", 150_000_000_000))
    size = batchfit.apply.batch_size(run)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any, List, Mapping, Sequence, Tuple

__all__ = ["ResultMismatch", "load", "check", "batch_size", "describe"]


# (problems, notes) that a check found.
_Findings = Tuple[List[str], List[str]]


class ResultMismatch(Exception):
    """The batchfit result does not stand for this training run."""


def load(source: str | os.PathLike[str] | dict[str, Any], binary: str | None = None) -> dict[str, Any]:
    """The run record named by source: a path to JSON written by
    `batchfit search --json` (its first run), or a run id or "latest",
    looked up in the history with `batchfit show SOURCE --json`."""
    if isinstance(source, dict):
        return _first_run(source, "the given result")
    source = os.fspath(source)
    if os.path.exists(source):
        with open(source, encoding="utf-8") as f:
            try:
                doc = json.load(f)
            except ValueError as e:
                raise ResultMismatch(f"{source} is not batchfit JSON ({e}); write it with batchfit search --json > FILE") from e
        return _first_run(doc, source)
    if os.sep in source or source.endswith(".json"):
        raise ResultMismatch(f"{source}: no such file; write it with batchfit search --json > {source}")
    return _first_run(_show(source, binary), f"batchfit show {source}")


def _show(run_id: str, binary: str | None) -> Any:
    exe = binary
    if not exe:
        from batchfit.binary import find  # $BATCHFIT_BINARY, the wheel's, PATH: as the API finds it

        try:
            exe = find()
        except FileNotFoundError as e:
            raise ResultMismatch(f"cannot look up run {run_id!r}: {e}; or give the path of a file written with "
                                 "batchfit search --json") from None
    p = subprocess.run([exe, "show", run_id, "--json"], capture_output=True, text=True)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = None
    if p.returncode != 0 or doc is None:
        msg = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        raise ResultMismatch(f"batchfit show {run_id}: {msg}")
    return doc


def _first_run(doc: Any, where: str) -> dict[str, Any]:
    """The first run of batchfit's JSON envelope ({"schema_version", "runs",
    "error"}); a bare run record is taken as it is."""
    if isinstance(doc, dict) and "runs" in doc:
        runs = doc.get("runs") or []
        if not runs:
            err = (doc.get("error") or {}).get("message") or "no run"
            raise ResultMismatch(f"{where} holds no run: {err}")
        return runs[0]
    if isinstance(doc, dict) and "trials" in doc:
        return doc
    raise ResultMismatch(f"{where} is not a batchfit result")


def batch_size(run: dict[str, Any], use: str = "answer") -> int:
    """The size to train at: the answer (the largest that ran), or with
    use="margin" the largest that left --margin (else 5 %) of memory free."""
    if use not in ("answer", "margin"):
        raise ValueError(f"use must be 'answer' or 'margin', not {use!r}")
    size = run.get("answer") or 0
    if use == "margin":
        size = run.get("margin_size") or _margin_5(run) or 0
        if not size:
            raise ResultMismatch("the result has no size with memory left free (no memory figures); use='answer'")
    if size <= 0:
        raise ResultMismatch(f"the result has no answer (status {run.get('status')!r}: {run.get('error') or 'nothing fits'})")
    return size


def _margin_5(run: dict[str, Any]) -> int | None:
    margins = run.get("margins") or []
    for m in margins:
        if isinstance(m, dict) and m.get("percent") == 5:
            return m.get("batch_size")
    return None


def describe(run: dict[str, Any]) -> str:
    """One line naming the run: its id, GPU and the size."""
    gpu = _gpu_name(run) or "an unknown GPU"
    limit = (run.get("settings") or {}).get("memory_limit_bytes")
    where = f"{gpu} capped at {limit / 2**30:.2f} GiB" if limit else gpu
    return f"run {run.get('id') or '(unsaved)'} on {where}: {run.get('answer')}"


def check(run: dict[str, Any], argv: Sequence[str] | None = None, device: tuple[str, int] | None = None,
          env: Mapping[str, str] | None = None, force: bool = False) -> list[str]:
    """Raises ResultMismatch when run does not stand for this training run;
    returns notes (strings) worth printing otherwise. argv is the program's
    sys.argv (the default), device the (name, total bytes) of the GPU it
    trains on (None: not checked), env its environment (the default: the
    one it was launched with, launch_environ). force turns every refusal
    into a note."""
    argv = sys.argv if argv is None else argv
    env = launch_environ() if env is None else env
    problems: list[str] = []
    notes: list[str] = []
    if run.get("simulated"):
        problems.append("the result comes from batchfit's simulated GPU (batchfit demo), not a real one")
    if (run.get("status") or "") != "found" or not run.get("answer"):
        problems.append(f"the search did not find an answer (status {run.get('status')!r})")
    if run.get("flaky"):
        notes.append("the boundary was flaky: the answer is the safe side below it")
    p, n = _check_args(run, argv)
    problems += p
    notes += n
    problems += _check_files(run)
    problems += _check_env(run, env)
    if device is not None:
        p, n = _check_gpu(run, device)
        problems += p
        notes += n
    if problems and not force:
        raise ResultMismatch("batchfit result does not match this run: " + "; ".join(problems) +
                             " (search again here, or pass force=True to use it anyway)")
    return problems + notes


def _script_and_args(argv: Sequence[str]) -> list[str]:
    """Drop a leading python interpreter (and -u style flags) from a recorded
    command, and a `-m module` pair, so that it lines up with sys.argv."""
    args = list(argv)
    if args and os.path.basename(args[0]).startswith("python"):
        args = args[1:]
        while args and args[0].startswith("-") and args[0] != "-m":
            args = args[1:]
    return args


def _check_args(run: dict[str, Any], argv: Sequence[str]) -> _Findings:
    """(problems, notes) of argv against the searched command: every
    recorded argument must come, in order (the batch size's may have any
    value); arguments added since are noted, those of batchfit's callbacks
    aside, as they may change memory too."""
    recorded = _script_and_args(run.get("command") or [])
    if not recorded:
        return [], []
    current = list(argv)
    if recorded[0] == "-m" and len(recorded) > 1:
        # python -m pkg.mod: sys.argv[0] is the module's file
        mod = recorded[1].replace(".", os.sep)
        if not current or not (current[0].endswith(mod + ".py") or current[0].endswith(os.path.join(mod, "__main__.py"))):
            return [f"the search ran module {recorded[1]}, this is {current[0] if current else '?'}"], []
        recorded, current = recorded[2:], current[1:]
    else:
        script = recorded[0]
        if not os.path.isabs(script):
            script = os.path.join(run.get("dir") or "", script)
        if not current or os.path.realpath(script) != os.path.realpath(current[0]):
            return [f"the search ran {recorded[0]}, this is {current[0] if current else '?'}"], []
        recorded, current = recorded[1:], current[1:]
    used: set[int] = set()
    i = 0
    for want in recorded:
        while i < len(current) and not _arg_matches(want, current[i]):
            i += 1
        if i == len(current):
            return [f"the argument {want!r} of the searched command is missing or changed"], []
        used.add(i)
        i += 1
    extra: list[str] = []
    skip = False
    for j, arg in enumerate(current):
        if j in used or skip:
            skip = False
            continue
        if "batchfit" in arg or "callbacks" in arg:
            skip = "=" not in arg and arg.startswith("--") and "+=" not in arg
            continue
        extra.append(arg)
    if extra:
        return [], [f"arguments not in the search: {' '.join(extra)} (if they change memory use, search again)"]
    return [], []


def _arg_matches(want: str, got: str) -> bool:
    if "{}" not in want:
        return want == got
    head, _, tail = want.partition("{}")
    return got.startswith(head) and got.endswith(tail) and len(got) > len(head) + len(tail)


def _check_files(run: dict[str, Any]) -> list[str]:
    inputs = run.get("inputs") or {}
    problems: list[str] = []
    for f in (inputs.get("files") or []) + (inputs.get("loaded") or []):
        path = f.get("path") or ""
        if not os.path.isabs(path):
            path = os.path.join(run.get("dir") or "", path)
        if not os.path.exists(path):
            problems.append(f"{f.get('path')} is gone")
        elif not _same_file(path, f.get("hash") or ""):
            problems.append(f"{f.get('path')} changed since the search")
    return problems


def _same_file(path: str, want: str) -> bool:
    if want.startswith("sha256:"):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return "sha256:" + h.hexdigest() == want
    if want.startswith("stat:"):
        st = os.stat(path)
        return want == f"stat:{st.st_size}:{st.st_mtime_ns}"
    return False


def launch_environ() -> dict[str, str]:
    """The environment the process was started with, as a search compares
    it: frameworks set variables of their own at import (Lightning sets
    PYTORCH_NVML_BASED_CUDA_CHECK, torch CUDA_MODULE_LOADING), which a
    search's fingerprint never saw. Linux keeps it in /proc/self/environ;
    elsewhere os.environ is the best there is."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return dict(os.environ)
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def _check_env(run: dict[str, Any], env: Mapping[str, str]) -> list[str]:
    recorded = (run.get("inputs") or {}).get("env") or []
    problems: list[str] = []
    names = set()
    for kv in recorded:
        name, _, value = kv.partition("=")
        names.add(name)
        if env.get(name) != value:
            problems.append(f"{name} was {value!r} in the search, is {env.get(name)!r} now")
    # A memory-relevant variable set now but not in the search changes the run
    # too; the prefixes are those batchfit fingerprints (BATCHFIT_* aside).
    for name in sorted(env):
        if name.startswith(_MEMORY_ENV) and name not in names and not name.startswith("BATCHFIT_") and name not in _TRIAL_ENV:
            problems.append(f"{name} is set now ({env[name]!r}) but was not in the search")
    return problems


_MEMORY_ENV = ("PYTORCH_", "CUDA_", "XLA_", "TF_", "NCCL_", "OMP_")
# Variables batchfit sets for each trial or that name the device, which
# differ between a search and training by design.
_TRIAL_ENV = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}


def _gpu_name(run: dict[str, Any]) -> str | None:
    devices = (run.get("gpu") or {}).get("devices") or []
    return devices[0].get("name") if devices else None


def _check_gpu(run: dict[str, Any], device: tuple[str, int]) -> _Findings:
    name, total = device
    devices = (run.get("gpu") or {}).get("devices") or []
    if not devices:
        return [], ["the result does not say which GPU it was measured on"]
    rec_name, rec_total = devices[0].get("name") or "", devices[0].get("total_bytes") or 0
    limit = (run.get("settings") or {}).get("memory_limit_bytes") or 0
    gib = 2**30
    if not limit:
        if name != rec_name or abs(total - rec_total) > 0.01 * max(total, 1):
            return [f"it was measured on {rec_name} ({rec_total / gib:.2f} GiB), this is {name} ({total / gib:.2f} GiB)"], []
        return [], []
    if total < limit:
        return [f"it was measured for a card of {limit / gib:.2f} GiB (on {rec_name}); this {name} has {total / gib:.2f} GiB"], []
    notes: list[str] = []
    if name != rec_name:
        notes.append(f"measured on {rec_name} capped at {limit / gib:.2f} GiB: another GPU's kernels and workspaces "
                     "may use a little more or less memory")
    if total > limit * 1.05:
        notes.append(f"searched for a {limit / gib:.2f} GiB card; this {name} has {total / gib:.2f} GiB, so the size "
                     "is safe here but not the largest")
    return [], notes
