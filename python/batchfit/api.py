"""batchfit from Python: run the batchfit binary and read its results.

    import batchfit
    result = batchfit.search("python train.py --batch-size {}", memory_limit="24GiB")
    result.answer          # 282
    result.proof           # (Trial 282 ok, Trial 283 oom)

Each function runs the binary (``batchfit.binary.find``) with ``--json`` and
reads its one JSON document (docs/json.md): ``{"schema_version", "runs":
[RUN, ...], "doctor", "error"}``. Keyword options become flags
(``memory_limit="24GiB"`` is ``--memory-limit=24GiB``), each checked against
the type of its flag; progress goes to ``sys.stderr`` as the binary writes
it, or in a notebook to one live view of the search (``--events``), and a
Result shows itself there as batchfit's HTML report, inline. A search that ends without an answer raises BatchfitError, which carries
the partial Result when trials ran. Standard library only.
"""

from __future__ import annotations

import datetime
import functools
import html
import json
import math
import numbers
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from batchfit import binary

#: The version of the JSON document this module reads.
SCHEMA_VERSION = 1

__all__ = [
    "BatchfitError",
    "DoctorReport",
    "Finding",
    "GPU",
    "Margin",
    "Peaks",
    "Result",
    "Run",
    "Throughput",
    "SCHEMA_VERSION",
    "SizeThroughput",
    "Trial",
    "demo",
    "doctor",
    "search",
]


class BatchfitError(Exception):
    """batchfit ended without an answer: an error, nothing fits (exit code 3),
    a usage error (2), an interrupted search (130). ``result`` holds what the
    run recorded, when it recorded anything."""

    def __init__(self, message: str, hint: str = "", exit_code: int = 1, result: Result | None = None,
                 stderr: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code
        self.result = result
        #: The end of what the binary wrote on stderr.
        self.stderr = stderr

    def __str__(self) -> str:
        return f"{self.message}\nhint: {self.hint}" if self.hint else self.message


@dataclass(frozen=True)
class Peaks:
    """A trial's peak memory in bytes; None where it was not measured."""

    allocated: int | None  # the framework's own peak (torch's max_memory_allocated)
    reserved: int | None  # torch's max_memory_reserved
    device: int | None  # NVML: the trial's whole process tree on the GPU


@dataclass(frozen=True)
class Trial:
    """One trial: the program run once at one batch size."""

    n: int
    batch_size: int
    outcome: str  # ok, oom, host_oom, size_limit, timeout, crash, canceled
    seconds: float
    peaks: Peaks
    samples_per_second: float | None
    reason: str = ""
    phase: str = ""
    retry: bool = False
    #: For a trial too large, what it needed at least, in bytes: the one
    #: figure batchfit shows for it everywhere ("> 79.99 GiB"); None for a
    #: trial that ran or crashed, or when nothing is known.
    needed: int | None = None
    #: How ``needed`` is known: "peak" (what it held before it failed),
    #: "request" (the allocator's memory and refused request at the OOM),
    #: "process" (the process's device memory then, with the request).
    needed_basis: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Trial:
        return cls(
            n=int(d.get("n") or 0),
            batch_size=int(d.get("batch_size") or 0),
            outcome=str(d.get("outcome") or ""),
            seconds=float(d.get("seconds") or 0),
            peaks=Peaks(
                allocated=d.get("peak_allocated_bytes"),
                reserved=d.get("peak_reserved_bytes"),
                device=d.get("peak_device_bytes"),
            ),
            samples_per_second=d.get("samples_per_second"),
            reason=str(d.get("reason") or ""),
            phase=str(d.get("phase") or ""),
            retry=bool(d.get("retry")),
            needed=(d.get("needed") or {}).get("bytes"),
            needed_basis=str((d.get("needed") or {}).get("basis") or ""),
            raw=dict(d),
        )


@dataclass(frozen=True)
class GPU:
    """The GPU(s) a run measured on."""

    name: str
    count: int
    capacity_bytes: int | None  # what a trial may use: the card or --memory-limit
    devices: list = field(default_factory=list, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> GPU | None:
        if not d:
            return None
        devices = list(d.get("devices") or [])
        names = sorted({str(x.get("name") or "") for x in devices})
        return cls(name=", ".join(names), count=len(devices), capacity_bytes=d.get("capacity_bytes"), devices=devices)


@dataclass(frozen=True)
class Margin:
    """The largest batch size that leaves a share of memory free."""

    percent: float
    batch_size: int | None  # None when unknown, or when no size leaves that much
    basis: str  # searched (--margin), measured (the trials prove it), model, unknown
    why: str = ""  # why there is no size

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Margin:
        return cls(percent=float(d.get("percent") or 0), batch_size=d.get("batch_size") or None,
                   basis=str(d.get("basis") or ""), why=str(d.get("why") or ""))


@dataclass(frozen=True)
class SizeThroughput:
    """Samples/s at one size, measured by --throughput."""

    batch_size: int
    samples_per_second: float | None
    noise: float  # relative standard error: 0.004 is ±0.4 %
    trial: int | None = None


@dataclass(frozen=True)
class Throughput:
    """What --throughput measured: samples/s at the answer and sizes below
    it, and the size to train at for speed."""

    recommended: int | None
    gain: float  # recommended's samples/s over the answer's, less one
    sizes: list[SizeThroughput]
    steps: int = 0
    warmup_intervals: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Throughput | None:
        if not d:
            return None
        return cls(
            recommended=d.get("recommended") or None,
            gain=float(d.get("gain") or 0),
            sizes=[
                SizeThroughput(batch_size=int(x.get("batch_size") or 0), samples_per_second=x.get("samples_per_second") or None,
                               noise=float(x.get("noise") or 0), trial=x.get("trial") or None)
                for x in d.get("sizes") or []
            ],
            steps=int(d.get("steps") or 0),
            warmup_intervals=int(d.get("warmup_intervals") or 0),
        )


@dataclass(frozen=True)
class Run:
    """One search: its answer, the trials that prove it, and the rest of the
    record (``raw``)."""

    status: str  # found, nothing_fits, failed, interrupted
    answer: int | None
    first_failure: int | None  # the size above the answer that failed: the proof's other half
    recommended: int | None  # the size to train at for speed (--throughput)
    margin_size: int | None  # the largest size leaving --margin (else 5 %) free: margins[0]'s
    trials: list[Trial]
    gpu: GPU | None
    command: list[str]
    margins: list[Margin] = field(default_factory=list)  # --margin's share, and the 5 % the summary shows
    throughput: Throughput | None = None
    id: str | None = None
    cached: bool = False
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def proof(self) -> tuple[Trial, Trial] | None:
        """The trial that ran at the answer and the first that failed at the
        size above it; None without both (an answer that is --max)."""
        ok = [t for t in self.trials if t.batch_size == self.answer and t.ok]
        failed = [t for t in self.trials if t.batch_size == self.first_failure and not t.ok]
        if self.answer is None or self.first_failure is None or not ok or not failed:
            return None
        return ok[-1], failed[0]

    @property
    def flaky(self) -> list[dict]:
        """Sizes seen both to run and to fail; the answer is then the safe side."""
        return list(self.raw.get("flaky") or [])

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Run:
        margins = [Margin.from_json(m) for m in d.get("margins") or []]
        return cls(
            status=str(d.get("status") or ""),
            answer=d.get("answer") or None,
            first_failure=d.get("first_failure") or None,
            recommended=d.get("recommended") or None,
            # Binaries before schema_version 1 wrote --margin's size as margin_size.
            margin_size=margins[0].batch_size if margins else d.get("margin_size") or None,
            trials=[Trial.from_json(t) for t in d.get("trials") or []],
            gpu=GPU.from_json(d.get("gpu")),
            command=list(d.get("command") or []),
            margins=margins,
            throughput=Throughput.from_json(d.get("throughput")),
            id=d.get("id") or None,
            cached=bool(d.get("cached")),
            error=_message(d.get("error")),
            warnings=list(d.get("warnings") or []),
            raw=dict(d),
        )

    def describe(self) -> str:
        """One line: the answer and what proves it, or how the run ended."""
        where = f" on {self.gpu.name}" if self.gpu else ""
        trials = f"{len(self.trials)} trial{'' if len(self.trials) == 1 else 's'}"
        if self.status == "found" and self.answer is not None:
            if self.flaky:
                why = "flaky boundary, the safe side"
            elif self.cached:
                why = "from the history"
            elif self.first_failure:
                why = f"{self.first_failure} failed"
            else:
                why = "the --max bound"
            return f"answer {self.answer} ({why}), {trials}{where}"
        return f"{self.status}{': ' + self.error if self.error else ''}, {trials}{where}"


@dataclass(frozen=True)
class Result:
    """What a batchfit command printed: its runs (one, or one per GPU model
    with ``per_gpu_model=True``). ``answer``, ``proof``, ``trials`` and the
    other run fields are the first run's."""

    runs: list[Run]
    schema_version: int = SCHEMA_VERSION
    raw: dict = field(default_factory=dict, repr=False, compare=False)
    #: The run's HTML report (what ``--report`` writes), when there is one.
    report_html: str | None = field(default=None, repr=False, compare=False)

    @property
    def run(self) -> Run:
        if not self.runs:
            raise ValueError("the result holds no run")
        return self.runs[0]

    @property
    def answer(self) -> int | None:
        return self.run.answer

    @property
    def first_failure(self) -> int | None:
        return self.run.first_failure

    @property
    def proof(self) -> tuple[Trial, Trial] | None:
        return self.run.proof

    @property
    def trials(self) -> list[Trial]:
        return self.run.trials

    @property
    def recommended(self) -> int | None:
        return self.run.recommended

    @property
    def margin_size(self) -> int | None:
        return self.run.margin_size

    @property
    def margins(self) -> list[Margin]:
        return self.run.margins

    @property
    def status(self) -> str:
        return self.run.status

    @property
    def gpu(self) -> GPU | None:
        return self.run.gpu

    def __repr__(self) -> str:
        if not self.runs:
            return "<batchfit.Result: no run>"
        return "<batchfit.Result " + "; ".join(r.describe() for r in self.runs) + ">"

    def _repr_html_(self) -> str:
        """Jupyter's view: batchfit's own HTML report inline, the body of its
        page (report.WriteHTMLFragment): one element whose styles apply
        under it alone, with no script, so that it renders as it is in any
        notebook, sandboxed or not. A table of the trials without one."""
        if self.report_html:
            return _fragment(self.report_html)
        return "".join(_run_table(r) for r in self.runs) or html.escape(repr(self))


def _fragment(page: str) -> str:
    """The body of batchfit's report page, which is the report's embeddable
    fragment; a page without one (another release's) escaped in a <pre>."""
    start, end = page.find("<body>"), page.rfind("</body>")
    body = page[start + len("<body>"):end].strip() if 0 <= start < end else ""
    if body.startswith('<div class="batchfit-report"'):
        return body
    return f"<pre>{html.escape(page)}</pre>"


def _message(error: Any) -> str | None:
    """A run's error: a string, or an object with its message."""
    if isinstance(error, Mapping):
        error = error.get("message")
    return str(error) if error else None


def _run_table(run: Run) -> str:
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            t.n, t.batch_size, t.outcome, f"{t.seconds:.1f}",
            "" if t.peaks.allocated is None else f"{t.peaks.allocated / 2**30:.2f}",
            "" if t.samples_per_second is None else f"{t.samples_per_second:.1f}",
        )) + "</tr>"
        for t in run.trials
    )
    head = "".join(f"<th>{h}</th>" for h in ("trial", "batch size", "outcome", "seconds", "peak GiB", "samples/s"))
    return f"<p>{html.escape(run.describe())}</p><table><tr>{head}</tr>{rows}</table>"


@dataclass(frozen=True)
class Finding:
    """One thing ``batchfit doctor`` found, with its likely cause and fix."""

    kind: str
    severity: str
    summary: str
    bytes: int | None = None
    cause: str = ""
    fix: str = ""


@dataclass(frozen=True)
class DoctorReport:
    """What ``batchfit doctor`` measured of a warm worker (``raw``) and found."""

    findings: list[Finding]
    size: int | None
    oom_size: int | None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DoctorReport:
        return cls(
            findings=[
                Finding(
                    kind=str(f.get("kind") or ""),
                    severity=str(f.get("severity") or ""),
                    summary=str(f.get("summary") or ""),
                    bytes=f.get("bytes"),
                    cause=str(f.get("cause") or ""),
                    fix=str(f.get("fix") or ""),
                )
                for f in d.get("findings") or []
            ],
            size=d.get("size") or None,
            oom_size=d.get("oom_size") or None,
            raw=dict(d),
        )


def search(
    command: str | Sequence[str],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    progress: bool = True,
    report: str | os.PathLike | None = None,
    extra_args: Iterable[str] = (),
    **options: Any,
) -> Result:
    """Find the largest batch size ``command`` runs at (``batchfit search``).

    ``command`` is a list of arguments or a string split as a shell would
    (no shell runs it); ``{}`` in it is replaced by the batch size. Options
    are ``batchfit search`` flags: ``memory_limit="24GiB"``, ``steps=3``,
    ``margin=0.05``, ``gpus=[0, 1]``, ``fresh=True``, ``timeout=600``
    (seconds) ...; a value of the wrong type for its flag is a TypeError.
    ``extra_args``, a sequence of str, are passed as they are. ``report`` keeps
    the HTML report in that file (it is read into ``Result.report_html``
    either way). Progress goes to ``sys.stderr``, or in a notebook to one
    live HTML view; ``progress=False`` shows none.
    """
    argv = _command(command)
    return _result(["search", *_flags("search", options), *_args(extra_args)], argv, cwd=cwd, env=env, progress=progress, report=report)


def demo(
    *,
    progress: bool = True,
    report: str | os.PathLike | None = None,
    extra_args: Iterable[str] = (),
    **options: Any,
) -> Result:
    """A whole search on batchfit's simulated GPU (``batchfit demo``): no GPU
    needed. Takes the options of ``search`` and ``sim_gpus``, ``sim_flaky``."""
    return _result(["demo", *_flags("demo", options), *_args(extra_args)], [], cwd=None, env=None, progress=progress, report=report)


def doctor(
    command: str | Sequence[str],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    progress: bool = True,
    extra_args: Iterable[str] = (),
    **options: Any,
) -> DoctorReport:
    """Run a warm worker (``python -m batchfit.worker module:Trial``) through
    ``batchfit doctor``'s protocol and return what leaks between trials.
    Options: ``size``, ``repeat``, ``max``, ``steps``, ``memory_limit``,
    ``no_fresh`` ..."""
    args = ["doctor", "--json", *_flags("doctor", options), *_args(extra_args), "--", *_command(command)]
    return _finish(_execute(args, cwd=cwd, env=env, progress=progress), _doctor_report)


def _doctor_report(output: _Output) -> DoctorReport:
    out, err, code = output.out, output.err, output.code
    doc = _document(out, err, code)
    if isinstance(doc, Mapping) and "schema_version" in doc:
        _raise_for(doc.get("error"), code, err, None)
        body = doc.get("doctor") or next(iter(doc.get("runs") or []), None) or {}
    else:
        body = doc
        if code != 0:
            _raise_for(_legacy_error(body, code, err), code, err, None)
    return DoctorReport.from_json(body)


def _result(args: list[str], argv: list[str], *, cwd: str | os.PathLike | None, env: Mapping[str, str] | None,
            progress: bool, report: str | os.PathLike | None) -> Result:
    with tempfile.TemporaryDirectory(prefix="batchfit-") as tmp:
        path = os.path.abspath(os.fspath(report)) if report is not None else os.path.join(tmp, "report.html")
        full = [*args, "--json", "--report", path]
        if argv:
            full += ["--", *argv]
        output = _execute(full, cwd=cwd, env=env, progress=progress, events=True)
        try:
            with open(path, encoding="utf-8") as f:
                page: str | None = f.read()
        except OSError:
            page = None
    return _finish(output, lambda o: _search_result(o, page))


def _search_result(output: _Output, page: str | None) -> Result:
    out, err, code = output.out, output.err, output.code
    envelope = _envelope(_document(out, err, code), code, err)
    runs = [Run.from_json(r) for r in envelope.get("runs") or []]
    result = Result(runs=runs, schema_version=int(envelope.get("schema_version") or 0), raw=envelope, report_html=page)
    _raise_for(envelope.get("error"), code, err, result if runs else None)
    if not runs:
        raise BatchfitError("batchfit printed no run", exit_code=code, stderr=err)
    return result


#: The variable that names the pipe batchfit watches (internal/parentpipe).
_PARENT_FD_ENV = "BATCHFIT_PARENT_FD"


@dataclass(frozen=True)
class _Output:
    """How a batchfit command ended."""

    out: str
    err: str  # the end of stderr
    code: int
    interrupt: KeyboardInterrupt | None = None  # the Ctrl-C passed on to it


_T = TypeVar("_T")


def _finish(output: _Output, read: Callable[[_Output], _T]) -> _T:
    """read(output): what batchfit printed. After a Ctrl-C, the error read
    raises (BatchfitError with the run so far) is raised from the
    KeyboardInterrupt; a batchfit that ended well all the same gives the
    KeyboardInterrupt itself: the caller asked to stop."""
    if output.interrupt is None:
        return read(output)
    try:
        read(output)
    except BatchfitError as e:
        raise e from output.interrupt
    raise output.interrupt


def _execute(args: list[str], *, cwd: str | os.PathLike | None, env: Mapping[str, str] | None, progress: bool,
             events: bool = False) -> _Output:
    """Runs the binary with args to its end. Its progress lines go to
    sys.stderr as they come (when progress); in a notebook, a command that
    takes --events (search, demo: events) is shown instead by one HTML view
    that its events update (_LiveView), and its stderr is kept for errors
    only. Ctrl-C (a KeyboardInterrupt here) is passed on to batchfit, which
    stops its trials and prints what it recorded; a second one kills it.

    batchfit runs in a session of its own, where no signal of this
    process's terminal reaches it, and watches a pipe ($BATCHFIT_PARENT_FD)
    whose write end only this process holds: when this process ends,
    however it ends (SIGTERM, SIGKILL, an exception), batchfit stops its
    trials as on Ctrl-C."""
    try:
        exe = binary.find()
    except FileNotFoundError as e:
        raise BatchfitError(str(e), hint=f"set ${binary.ENV} to a batchfit binary", exit_code=1) from None
    view = _LiveView.start() if progress and events else None
    fds: tuple[int, ...] = ()
    if view is not None:
        args = _with_flag(args, f"--events=/dev/fd/{view.write_fd}")
        fds = (view.write_fd,)
    watched, held = os.pipe()
    try:
        proc = subprocess.Popen(
            [exe, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, **(env or {}), _PARENT_FD_ENV: str(watched)},
            pass_fds=(watched, *fds),
            text=True,
            encoding="utf-8",
            errors="replace",
            # Its own session: a Ctrl-C in the terminal reaches Python only, and
            # is passed on once, as it is from a notebook's interrupt.
            start_new_session=True,
        )
    except BaseException:
        os.close(held)
        if view is not None:
            view.close()
        raise
    finally:
        os.close(watched)
        if view is not None:
            view.started()
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes
    out_pipe, err_pipe = proc.stdout, proc.stderr
    out: list[str] = []
    tail: deque[str] = deque(maxlen=200)

    def relay() -> None:
        for line in err_pipe:
            tail.append(line)
            if progress and view is None:
                sys.stderr.write(line)
                sys.stderr.flush()

    # Both streams are read beside the wait, which takes a Ctrl-C: none of
    # what batchfit prints after one is lost. The readers start inside the
    # try, so that a Ctrl-C as they start is passed on too; the ones it
    # kept from starting start then.
    stdout = threading.Thread(target=lambda: out.append(out_pipe.read()), daemon=True)
    stderr = threading.Thread(target=relay, daemon=True)
    interrupt = None
    try:
        try:
            stdout.start()
            stderr.start()
            code = _wait(proc, view)
        except KeyboardInterrupt as e:
            interrupt = e
            for reader in (stdout, stderr):
                if reader.ident is None:
                    reader.start()
            proc.send_signal(signal.SIGINT)
            try:
                code = _wait(proc, view)
            except KeyboardInterrupt:
                # A second one: batchfit is killed (on Linux its trials die
                # with it: their parent-death signal), and the view says so
                # rather than go on showing trials as running.
                proc.kill()
                proc.wait()
                # What batchfit wrote before it died is read to its end (a
                # reader blocked on a pipe a stray process still holds is
                # left to itself) and the pipes closed once their readers
                # are done; tail is copied, as a reader may still add to it.
                for reader in (stdout, stderr):
                    if reader.ident is not None:
                        reader.join(timeout=1)
                for reader, pipe in ((stdout, out_pipe), (stderr, err_pipe)):
                    if not reader.is_alive():
                        pipe.close()
                if view is not None:
                    view.finish("".join(tail.copy()), proc.returncode, end="killed at a second interrupt")
                raise
    finally:
        # A batchfit still running here (an exception in the wait) stops
        # as it would at this process's end.
        os.close(held)
    stdout.join()
    stderr.join(timeout=5)
    out_pipe.close()
    err_pipe.close()
    if view is not None:
        view.finish("".join(tail), code)
    return _Output("".join(out), "".join(tail), code, interrupt)


def _wait(proc: subprocess.Popen, view: _LiveView | None) -> int:
    """proc's exit status; while it runs, the view shows the events so far
    (from this thread: the notebook's output belongs to the cell that
    runs it)."""
    if view is None:
        return proc.wait()
    while True:
        try:
            return proc.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            view.refresh()


def _with_flag(args: list[str], flag: str) -> list[str]:
    """args with flag added before the command's "--", if there is one."""
    i = args.index("--") if "--" in args else len(args)
    return [*args[:i], flag, *args[i:]]


def _notebook() -> bool:
    """Whether this process is a notebook's kernel (IPython's, with a
    kernel), where a display replaces the lines on stderr. Nothing is
    imported outside one."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython  # type: ignore
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class _LiveView:
    """A search in a notebook as it runs: one HTML output, updated from the
    JSON lines batchfit writes to --events (docs/json.md, "Events"): the
    phase and bracket, the rounds, and every trial with its size, outcome,
    memory figure and time; at the end, how it ended."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        from IPython.display import HTML, display  # type: ignore

        self._html = HTML
        self.write_fd = write_fd
        self._lock = threading.Lock()
        self._head: dict = {}
        self._trials: list[dict] = []
        self._running: dict[int, int] = {}
        self._phase, self._lo, self._hi, self._rounds = "", 0, 0, 0
        self._warnings: list[str] = []
        self._end = ""
        self._done = False
        self._changed = False
        self._handle = display(HTML(self.html()), display_id=True)
        self._reader = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
        self._reader.start()

    @classmethod
    def start(cls) -> _LiveView | None:
        """A view in a notebook, else None (stderr's lines show the search)."""
        if not _notebook():
            return None
        read_fd, write_fd = os.pipe()
        try:
            return cls(read_fd, write_fd)
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            raise

    def started(self) -> None:
        """batchfit holds the pipe's write end now: this process lets go of
        its own, so that the pipe ends with batchfit."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def close(self) -> None:
        self.started()
        self._reader.join(timeout=1)

    def _read(self, fd: int) -> None:
        with open(fd, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict):
                    with self._lock:
                        self._take(ev)
                        self._changed = True

    def _take(self, ev: dict) -> None:
        kind = ev.get("event")
        if kind == "start":
            self._head = ev
        elif kind in ("phase", "bracket", "plan"):
            self._phase, self._lo, self._hi = str(ev.get("phase") or ""), int(ev.get("lo") or 0), int(ev.get("hi") or 0)
            if kind == "plan":
                self._rounds += int(ev.get("rounds") or 1)
        elif kind == "trial_started":
            self._running[int(ev.get("n") or 0)] = int(ev.get("batch_size") or 0)
        elif kind == "trial":
            t = ev.get("trial") or {}
            self._running.pop(int(t.get("n") or 0), None)
            self._trials.append(ev)
        elif kind == "warning":
            self._warnings.append("warning: " + str(ev.get("message") or ""))
        elif kind == "end":
            self._done = True

    def refresh(self) -> None:
        with self._lock:
            if not self._changed:
                return
            self._changed = False
            page = self.html()
        self._handle.update(self._html(page))

    def finish(self, stderr: str, code: int, end: str = "") -> None:
        """The last state, once batchfit has ended: every event it wrote,
        how it ended (end, else the error of a batchfit that failed), and
        where no trial ran (an answer from the history) what it said on
        stderr instead."""
        self.close()
        with self._lock:
            self._running.clear()
            self._done = True
            self._end = end or (_stderr_error(stderr)[0] if code != 0 else "")
            if not self._trials:
                self._warnings += [line[len("batchfit: "):] for line in stderr.splitlines()
                                   if line.startswith("batchfit: ") and not line.startswith(("batchfit: error: ", "batchfit: hint: "))]
            self._changed = True
        self.refresh()

    def html(self) -> str:
        """The view's HTML: its styles scoped to its root, as the report's."""
        e = html.escape
        head = self._head
        title = e(str(head.get("title") or "batchfit"))
        gpu = str(head.get("gpu") or "")
        cap = head.get("limit_bytes") or head.get("capacity_bytes") or 0
        where = e(gpu + (f", {_gib(cap)} GiB" if cap else ""))
        if self._done:
            state = "finished" + (f": {e(self._end)}" if self._end else "")
        elif self._running:
            state = "running " + ", ".join(f"trial {n} at {size}" for n, size in sorted(self._running.items()))
        else:
            state = "starting" if not self._trials else "planning"
        bracket = "no bracket yet" if not (self._lo or self._hi) else f"bracket [{self._lo or '?'}, {self._hi or '?'}]"
        rows = []
        for ev in self._trials:
            t = ev.get("trial") or {}
            outcome = str(t.get("outcome") or "")
            cls = "ok" if outcome == "ok" else "bad"
            note = " (retry)" if t.get("retry") else ""
            rows.append(
                f'<tr><td class="num">{e(str(t.get("n") or ""))}</td><td class="num">{e(str(t.get("batch_size") or ""))}</td>'
                f'<td><span class="{cls}">{e(outcome)}</span>{e(note)}</td><td class="num">{e(str(ev.get("memory_text") or "–"))}</td>'
                f'<td class="num">{float(t.get("seconds") or 0):.1f}</td><td>{e(str(t.get("phase") or ""))}</td></tr>'
            )
        warnings = "".join(f'<p class="warn">{e(w)}</p>' for w in self._warnings)
        phase = f"{e(self._phase)}: " if self._phase else ""
        return (
            '<div class="batchfit-live"><style>'
            ".batchfit-live{font:13px/1.45 system-ui,sans-serif;color:#1c2230;background:#fff;border:1px solid #dde1e8;"
            "border-radius:8px;padding:10px 14px;max-width:760px}"
            ".batchfit-live h4{margin:0 0 4px;font-size:14px}.batchfit-live p{margin:2px 0}"
            ".batchfit-live table{border-collapse:collapse;margin-top:6px;width:100%}"
            ".batchfit-live th,.batchfit-live td{padding:3px 8px;border-bottom:1px solid #eef1f5;text-align:left}"
            ".batchfit-live td.num{text-align:right;font-variant-numeric:tabular-nums}"
            ".batchfit-live .ok{color:#0a7a55;font-weight:600}.batchfit-live .bad{color:#b3261e;font-weight:600}"
            ".batchfit-live .warn{color:#8a5300}"
            "</style>"
            f"<h4>{title}</h4><p>{where}</p>"
            f'<p class="state" data-done="{str(self._done).lower()}">{phase}{e(bracket)} · {self._rounds} round{"" if self._rounds == 1 else "s"}'
            f" · {len(self._trials)} trial{'' if len(self._trials) == 1 else 's'} · {state}</p>{warnings}"
            '<table><tr><th class="num">trial</th><th class="num">batch size</th><th>outcome</th>'
            '<th class="num">memory</th><th class="num">seconds</th><th>phase</th></tr>'
            f'{"".join(rows)}</table></div>'
        )


def _gib(b: Any) -> str:
    return f"{int(b) / 2**30:.2f}"


def _document(out: str, err: str, code: int) -> Any:
    """The JSON document on stdout; a usage error (exit 2) prints none, and
    is read from stderr."""
    if not out.strip():
        message, hint = _stderr_error(err)
        raise BatchfitError(message or f"batchfit exited with status {code} and printed nothing", hint=hint, exit_code=code or 1, stderr=err)
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        raise BatchfitError(f"batchfit printed no JSON document: {e}", exit_code=code or 1, stderr=err) from None


def _envelope(doc: Any, code: int, err: str) -> dict:
    """The document as the envelope {"schema_version", "runs", "doctor", "error"}.

    Binaries before schema_version 1 printed a run (an object), a list of
    runs (--per-gpu-model), or {"status", "error", "hint", "exit_code"} for a
    failure before any run; they are read into the same shape, so that a
    batchfit on PATH from before the envelope still works.
    """
    if isinstance(doc, Mapping) and "schema_version" in doc:
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise BatchfitError(
                f"batchfit printed JSON schema version {doc.get('schema_version')}; this module reads version {SCHEMA_VERSION}",
                hint="use the batchfit binary of the same release as this Python package",
                exit_code=code or 1,
                stderr=err,
            )
        return dict(doc)
    if isinstance(doc, list):
        runs = doc
    elif isinstance(doc, Mapping) and ("trials" in doc or "command" in doc):
        runs = [doc]
    else:
        runs = []
    error = _legacy_error(doc if not runs else runs[0], code, err) if code != 0 else None
    return {"schema_version": 0, "runs": runs, "error": error}


def _legacy_error(doc: Any, code: int, err: str) -> dict:
    message, hint = _stderr_error(err)
    if isinstance(doc, Mapping):
        message = doc.get("error") or message
        hint = doc.get("hint") or hint
        code = doc.get("exit_code") or code
    return {"message": message or f"batchfit exited with status {code}", "hint": hint, "exit_code": code}


def _raise_for(error: Mapping[str, Any] | None, code: int, err: str, result: Result | None) -> None:
    if error:
        raise BatchfitError(
            str(error.get("message") or "batchfit failed"),
            hint=str(error.get("hint") or ""),
            exit_code=int(error.get("exit_code") or code or 1),
            result=result,
            stderr=err,
        )
    if code != 0:
        message, hint = _stderr_error(err)
        raise BatchfitError(message or f"batchfit exited with status {code}", hint=hint, exit_code=code, result=result, stderr=err)


def _stderr_error(err: str) -> tuple[str, str]:
    """The last "batchfit: error: ..." and "batchfit: hint: ..." lines."""
    message = hint = ""
    for line in err.splitlines():
        if line.startswith("batchfit: error: "):
            message = line[len("batchfit: error: "):]
        elif line.startswith("batchfit: hint: "):
            hint = line[len("batchfit: hint: "):]
    return message, hint


def _command(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in command]
    if not argv:
        raise ValueError("batchfit: the command is empty")
    return argv


# Options the API sets itself.
_RESERVED = {"json", "quiet", "q", "report", "events", "help"}

# How each pflag type of flags.json takes a Python value; the tests check
# that every type there is here.
_KINDS = {
    "bool": "bool",
    "int": "int",
    "float64": "number",
    "string": "string",
    "duration": "duration",
    "age": "duration",
    "stringArray": "list",
}

_TAKES = {
    "bool": "a bool",
    "int": "an int",
    "number": "a number",
    "string": "a str, a path or a number",
    "duration": "a duration (seconds, a timedelta or a str such as '10m')",
    "list": "a sequence of str (one flag each)",
}


# lru_cache(maxsize=None), not functools.cache: that is Python 3.9's.
@functools.lru_cache(maxsize=None)
def _flag_types() -> dict[str, dict[str, str]]:
    """The pflag type of every flag of search, demo and doctor, by command
    and name: flags.json, which a Go test (cmd/batchfit TestPythonFlags)
    keeps equal to the binary's flags."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "flags.json"), encoding="utf-8") as f:
        return json.load(f)


def _flags(command: str, options: Mapping[str, Any]) -> list[str]:
    """Keyword options as flags of ``batchfit COMMAND``: memory_limit="24GiB"
    is --memory-limit=24GiB, fresh=True is --fresh and False --fresh=false,
    None leaves a flag out, a sequence repeats a list flag
    (history_env=["A", "B"]), gpus=[0, 1] is --gpus=0,1, a number of seconds
    or a timedelta is a duration.

    Each value is checked against the type of its flag (flags.json), so
    that it can only become that flag's value: a bool for a value flag or a
    str for a list flag is a TypeError that names the option. A value is
    always joined to its flag by "=", so that no value can stand in for the
    next flag, also in an option flags.json lacks: that one goes to batchfit
    as it is, which says whether it has the flag (a binary of another
    release may)."""
    types = _flag_types().get(command, {})
    args: list[str] = []
    for key, value in options.items():
        if key in _RESERVED:
            raise TypeError(f"batchfit: {key}= is not an option here: the API reads --json itself")
        if value is None:
            continue
        name = key.replace("_", "-")
        kind = _KINDS[types[name]] if name in types else None
        if kind == "bool" and value is True:
            args.append(f"--{name}")
        else:
            args += [f"--{name}={v}" for v in _values(key, name, value, kind)]
    return args


def _values(key: str, name: str, value: Any, kind: str | None) -> list[str]:
    """The values of option key (flag --name) of a kind of _KINDS, or of a
    flag flags.json lacks (None), which only the binary can check."""
    if kind is None:
        items = value if isinstance(value, (list, tuple)) else [value]
        return [str(v).lower() if isinstance(v, bool) else os.fspath(v) if isinstance(v, os.PathLike) else str(v) for v in items]
    if kind == "bool":
        if isinstance(value, bool):
            return [str(value).lower()]
    elif kind == "list":
        if not isinstance(value, (str, bytes)) and isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
            return list(value)
    elif isinstance(value, bool):
        pass  # a bool is an int to Python, and never a flag's value
    elif kind == "int":
        if isinstance(value, numbers.Integral):
            return [str(int(value))]
    elif kind == "number":
        if isinstance(value, numbers.Real):
            return [str(value)]
    elif kind == "duration":
        if isinstance(value, datetime.timedelta):
            return [_seconds(key, value.total_seconds())]
        if isinstance(value, numbers.Real):
            return [_seconds(key, value)]
        if isinstance(value, str):
            return [value]
    elif key == "gpus" and isinstance(value, (list, tuple, range)):
        if all(isinstance(v, (numbers.Integral, str)) and not isinstance(v, bool) for v in value):
            return [",".join(str(v) for v in value)]
    elif isinstance(value, (str, os.PathLike, numbers.Real)):
        return [os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    raise TypeError(f"batchfit: {key}= takes {_TAKES[kind]} for --{name}, not {type(value).__name__} {value!r}")


def _seconds(key: str, seconds: float | numbers.Real) -> str:
    """A number of seconds as a Go duration: 600 is 600s, 0.5 is 0.5s."""
    if not math.isfinite(seconds):
        raise ValueError(f"batchfit: {key}= must be a finite number of seconds, not {seconds!r}")
    return f"{float(seconds):.9f}".rstrip("0").rstrip(".") + "s"


def _args(extra_args: Iterable[str]) -> list[str]:
    """extra_args as batchfit's arguments: a sequence of str, each one
    argument; a bare str would be split into characters."""
    if isinstance(extra_args, (str, bytes)) or not isinstance(extra_args, Iterable):
        raise TypeError(f"batchfit: extra_args= takes a sequence of str, one argument each, not {type(extra_args).__name__} {extra_args!r}")
    args = [os.fspath(a) if isinstance(a, os.PathLike) else a for a in extra_args]
    if not all(isinstance(a, str) for a in args):
        raise TypeError(f"batchfit: extra_args= takes a sequence of str, not {args!r}")
    return args
