"""A preloading fork server for batchfit's Python trials.

batchfit starts it once per search as `python3 -m batchfit.forkserver` with the
trials' interpreter and environment. It imports the heavy third-party modules
the program uses (torch, torchvision, ...) once, never initialises CUDA or any
other GPU runtime, and forks one child per trial. Each child sets the trial's
environment before anything touches the GPU and runs the program as
`python script.py args` or `python -m module args` would, so its GPU memory is
as clean as a fresh process's: the CUDA context is made in the child.

The protocol is JSON lines on two private descriptors (requests on fd 3,
replies on fd 4), never stdin/stdout, which preloaded modules may print to:

  -> {"op": "preload", "modules": ["torch", ...],
      "third_party_only": bool, "home": dir or ""}
  <- {"event": "preloaded", "pid": N, "loaded": [...],
      "dropped": [{"module", "reason", "unsafe"}], "poisoned": bool,
      "packages": [...]}
  -> {"op": "run", "argv": [...], "env": [...], "cwd": ..., "stdout": path,
      "stderr": path, "cgroup": path or ""}
  <- {"event": "started", "pid": N, "cgroup": bool} or {"event": "error", ...}
  <- {"event": "exit", "pid": N, "code": C, "signal": S}   (later, unreaped)
  -> {"op": "reap", "pid": N}

With "third_party_only" (batchfit's guess from the script's import
statements, before any trial ended) a name is imported only if Python would
load it from site-packages or dist-packages, and no module of that name lies
in "home" (the script's directory, where the program finds its own modules
first); other names, the program's own modules among them, are skipped
without a word. "packages" are the third-party top-level packages the server
holds once it has imported (what the imported ones imported too).

A module that initialised a GPU runtime or started a thread on import
("unsafe") would spoil the server, and so would a failed import (half of a
package imported): imports cannot be undone. So before each import the
server forks a backup of itself as it was, which waits on a private pipe
for one line. If the import goes well the line is empty and the backup
exits; if not, the spoiled process hands over to the backup, telling it the
module it dropped and why, and exits without another word on the channel.
The backup is then the server: it goes on with the next module and sends
the "preloaded" reply itself, with its own "pid". It is in the server's
process group, which outlives the process that led it, so batchfit still
ends the server by its group; re-parented to batchfit, it dies with it; the
reply channel ends only when every process holding it has exited. A server that
has forked trials (whose exits only it can report), or that cannot fork,
imports in place instead, and an unsafe module "poisons" it: it refuses to
fork and batchfit starts a new one without that module.

The server stays single-threaded: fork copies only the calling thread, and
a lock held by another thread would stay locked in the child.
"""

from __future__ import annotations

import importlib
import json
import os
import selectors
import signal
import sys
import time
import traceback
import types
from dataclasses import dataclass
from typing import Any, NoReturn

from batchfit._runtime.lines import write_line

REQUESTS_FD = 3
REPLIES_FD = 4

# Exit status of a child that failed before the program ran.
_SETUP_FAILED = 127

# batchfit's pid, as batchfit gave it (main), else the server's parent. A
# backup that takes over is re-parented to it, as batchfit is a child
# subreaper.
_batchfit = 0


def gpu_state() -> str | None:
    """Why forking now would share a GPU runtime with the children, or None.
    Checks every runtime batchfit knows without starting one: torch's CUDA,
    JAX's backends, and any open GPU device file (the driver was opened:
    NVML, CUDA, ROCm)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    is_init = getattr(cuda, "is_initialized", None)
    if callable(is_init):
        try:
            if is_init():
                return "torch initialised CUDA"
        except Exception:
            pass
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is not None and getattr(bridge, "_backends", None):
        return "jax created a backend"
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/dev/nvidia") or target in ("/dev/kfd",) or target.startswith("/dev/dri/"):
                return f"a GPU device is open ({target})"
    except OSError:
        pass
    return None


def thread_count() -> int:
    """Threads of this process, the interpreter's and native ones alike."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def fork_hazard() -> str | None:
    """Why this process must not fork a trial, or None."""
    state = gpu_state()
    if state is not None:
        return state
    return thread_hazard()


def thread_hazard() -> str | None:
    """Threads that a fork would leave behind, or None. fork copies only the
    calling thread: whatever another thread held (a lock, half-updated
    state) stays held in the child. A Python thread is always a hazard.
    Native thread pools that know this stop themselves in a pthread_atfork
    prepare handler and start again when next needed (OpenBLAS does), so
    native threads count only when they survive a throwaway fork."""
    import threading

    if threading.active_count() > 1:
        return f"{threading.active_count() - 1} Python thread(s) running"
    if thread_count() == 1:
        return None
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    n = thread_count()
    if n > 1:
        return f"{n - 1} native thread(s) running that a fork does not stop"
    return None


@dataclass
class Backup:
    """A fork of the server made before an import, and the pipe it waits
    on: the write end in the server, the read end in the backup, whose own
    pid here is 0."""

    pid: int
    fd: int

    def dismiss(self) -> None:
        """The import went well: the backup is told so (an empty line; not
        the pipe's end, which a child the import forked may hold off) and
        exits, and is reaped."""
        try:
            os.write(self.fd, b"\n")
        except OSError:
            pass  # the backup is gone already
        os.close(self.fd)
        os.waitpid(self.pid, 0)


class Server:
    def __init__(self, requests: int = REQUESTS_FD, replies: int = REPLIES_FD) -> None:
        # Not for a program an import execs: it would hold the channel open.
        for fd in (requests, replies):
            os.set_inheritable(fd, False)
        self.requests = os.fdopen(requests, "rb", buffering=0)
        self.replies = replies
        self.children: set[int] = set()
        self.exited: set[int] = set()
        self.poisoned: str | None = None
        self.buffer = b""
        self.sel: selectors.BaseSelector | None = None
        self.wake_on_signals()
        # A handler (not SIG_IGN, which would let the kernel reap the
        # children) so that the wakeup fd hears of every exit.
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def wake_on_signals(self) -> None:
        """A new wakeup pipe, which each signal writes a byte to, so that
        the select of serve returns when a child exits."""
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)
        signal.set_wakeup_fd(self.wake_w)

    def selector(self) -> selectors.BaseSelector:
        sel = selectors.DefaultSelector()
        sel.register(self.requests, selectors.EVENT_READ, "requests")
        sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        return sel

    def reply(self, msg: dict[str, Any]) -> None:
        write_line(self.replies, msg)

    def serve(self) -> None:
        self.sel = self.selector()
        self.reply({"event": "ready", "pid": os.getpid(), "python": sys.executable,
                    "hazard": fork_hazard()})
        while True:
            # self.sel, not a local: a backup that took over in handle has
            # a selector of its own.
            for key, _ in self.sel.select(timeout=1.0):
                if key.data == "wake":
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                elif not self.read_requests():
                    return
            self.check_children()

    def read_requests(self) -> bool:
        chunk = self.requests.read(65536)
        if not chunk:
            return False  # batchfit closed the channel: the search is over
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line.strip():
                self.handle(json.loads(line))
        return True

    def handle(self, req: dict[str, Any]) -> None:
        op = req.get("op")
        if op == "preload":
            self.reply(self.preload(req.get("modules") or [], bool(req.get("third_party_only")),
                                    req.get("home") or None))
        elif op == "run":
            try:
                self.reply(self.run(req))
            except Exception as e:
                self.reply({"event": "error", "error": f"{type(e).__name__}: {e}"})
        elif op == "reap":
            pid = int(req["pid"])
            if pid in self.exited:
                os.waitpid(pid, 0)
                self.exited.discard(pid)
        else:
            self.reply({"event": "error", "error": f"unknown op {op!r}"})

    def preload(self, modules: list[str], third_party_only: bool = False,
                home: str | None = None) -> dict[str, Any]:
        loaded, dropped = [], []
        began = time.monotonic()
        for name in modules:
            if self.poisoned:
                break
            if third_party_only and not third_party(name, home):
                continue
            t = time.monotonic()
            drop = self.load(name)
            if drop is None:
                loaded.append(name)
                _log(f"imported {name} in {time.monotonic() - t:.2f} s")
            else:
                dropped.append(drop)
                _log(f"dropped {name} after {time.monotonic() - t:.2f} s: {drop['reason']}")
        _log(f"preloaded {len(loaded)} of {len(modules)} asked in {time.monotonic() - began:.2f} s")
        # The pid is this process's, which may be a backup that took over.
        return {"event": "preloaded", "pid": os.getpid(), "loaded": loaded, "dropped": dropped,
                "poisoned": self.poisoned is not None, "packages": _packages()}

    def load(self, name: str) -> dict[str, Any] | None:
        """Imports name, with a backup that takes over if the import spoils
        this process (see the module's docstring); the dropped entry when
        name was not loaded, else None. Returns in the backup, once it has
        taken over; never returns in a spoiled process."""
        if sys.modules.get(name) is not None:
            return None  # a module before it imported it, and was checked
        backup = self.fork_backup()
        if backup is not None and backup.pid == 0:
            return self.stand_by(backup.fd)
        drop = self.load_in_place(name)
        if backup is None:
            return drop
        if drop is not None:
            self.hand_over(backup, drop)
        backup.dismiss()
        return None

    def load_in_place(self, name: str) -> dict[str, Any] | None:
        """Imports name in this process: an unsafe module poisons it."""
        try:
            importlib.import_module(name)
        except BaseException as e:  # an import may call sys.exit
            return {"module": name, "reason": f"import failed: {type(e).__name__}: {e}", "unsafe": False}
        hazard = fork_hazard()
        if hazard is None:
            return None
        self.poisoned = f"{name}: {hazard}"
        return {"module": name, "reason": hazard, "unsafe": True}

    def fork_backup(self) -> Backup | None:
        """Forks a backup of this process as it is (pid 0 in the backup
        itself), or None: a server with trials keeps importing in place,
        since only it, their parent, can report their exits; so does one
        that cannot fork."""
        if self.children or self.exited:
            return None
        try:
            r, w = os.pipe()
        except OSError:
            return None
        _flush()  # else the backup would write it again
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return None
        if pid == 0:
            os.close(w)
            return Backup(0, r)
        os.close(r)
        return Backup(pid, w)

    def stand_by(self, fd: int) -> dict[str, Any]:
        """In the backup: wait until the server says whether it needs us, in
        one line. An empty one (the import went well), or the pipe's end
        without one (the server died), ends us; a dropped entry means the
        server is spoiled and we take over, and it is returned to the
        preload loop. The line, not the pipe's end, is the word: a child
        that the import forked holds a copy of the pipe's write end."""
        spoiled = os.getppid()
        data = b""
        while not data.endswith(b"\n") and (chunk := os.read(fd, 65536)):
            data += chunk
        os.close(fd)
        try:
            drop = json.loads(data)
        except ValueError:  # an empty line, nothing, or a server killed as it wrote
            os._exit(0)  # not atexit's nor the buffers': they are the server's
        self.take_over(spoiled)
        return drop

    def take_over(self, spoiled: int) -> None:
        """Make the backup the server: its own wakeup pipe and selector,
        shared with no other process (the spoiled one may not have gone),
        and, once the spoiled one has gone, the parent-death signal that
        fork cleared: batchfit, a child subreaper, is our parent then, and
        we die with it as the server did."""
        old = (self.wake_r, self.wake_w)
        self.wake_on_signals()
        for fd in old:
            os.close(fd)
        if self.sel is not None:
            self.sel.close()
            self.sel = self.selector()
        _adopt_parent_death(spoiled)

    def hand_over(self, backup: Backup, drop: dict[str, Any]) -> NoReturn:
        """In the spoiled server: let the backup take over and exit. The
        channel's ends are closed first, so that nothing this process does
        (a thread of the module it imported) can be mistaken for the
        server's."""
        try:
            _flush()  # what the import printed, for the log
            os.close(self.requests.fileno())
            os.close(self.replies)
            write_line(backup.fd, drop)
        finally:
            os._exit(0)

    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        hazard = self.poisoned or fork_hazard()
        if hazard is not None:
            return {"event": "error", "error": f"refused to fork: {hazard}"}
        go_r, go_w = os.pipe()
        _flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(go_w)
                os.read(go_r, 1)  # the parent has put us in the trial's cgroup
                os.close(go_r)
                child(req, (self.requests.fileno(), self.replies, self.wake_r, self.wake_w))
            except BaseException:
                # Before the program ran (a log that cannot be opened, a
                # working directory gone): said on stderr, the trial's log
                # once it is redirected.
                try:
                    traceback.print_exc()
                    sys.stderr.flush()
                except BaseException:
                    pass
            finally:
                os._exit(_SETUP_FAILED)
        os.close(go_r)
        # Both sides set the group, so that it exists before batchfit may
        # signal it, whichever runs first.
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        in_cgroup = False
        if req.get("cgroup"):
            try:
                with open(os.path.join(req["cgroup"], "cgroup.procs"), "w") as f:
                    f.write(str(pid))
                in_cgroup = True
            except OSError:
                pass
        os.write(go_w, b"1")
        os.close(go_w)
        _log(f"forked pid {pid} for trial {_env_value(req.get('env'), 'BATCHFIT_TRIAL') or '?'}")
        self.children.add(pid)
        return {"event": "started", "pid": pid, "cgroup": in_cgroup}

    def check_children(self) -> None:
        for pid in list(self.children):
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                self.children.discard(pid)
                continue
            if info is None or info.si_pid == 0:
                continue
            self.children.discard(pid)
            self.exited.add(pid)
            code, sig = (info.si_status, 0) if info.si_code == os.CLD_EXITED else (-1, info.si_status)
            # Left unreaped until batchfit says so: the zombie keeps the
            # pid, the trial's process group id, reserved while batchfit
            # kills what is left of the group.
            self.reply({"event": "exit", "pid": pid, "code": code, "signal": sig})


def third_party(name: str, home: str | None) -> bool:
    """Whether `import name` in the program would load an installed
    third-party package (hook.is_third_party), found without importing
    anything: not a module of the program's own in home, not the standard
    library, not a namespace package (no file to tell where it lies), not
    batchfit's own (as hook.third_party_packages)."""
    if not name.isidentifier() or name in sys.builtin_module_names:
        return False
    if name in ("batchfit", "sitecustomize", "usercustomize"):
        return False
    import importlib.util
    from importlib.machinery import PathFinder

    from batchfit._runtime import hook

    try:
        if home and PathFinder.find_spec(name, [home]) is not None:
            return False
        spec = importlib.util.find_spec(name)
    except Exception:  # a finder's own error, a name it refuses
        return False
    origin = getattr(spec, "origin", None)
    return isinstance(origin, str) and os.path.isabs(origin) and hook.is_third_party(origin)


def _log(msg: str) -> None:
    """A line of the server's timeline on its stderr (the search's
    forkserver.log): when it imported what, for how long, and when it
    forked each trial, to set beside the trials' own times."""
    now = time.time()
    stamp = time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}"
    try:
        sys.stderr.write(f"{stamp} {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _env_value(env: Any, name: str) -> str:
    """name's value in a request's environment (a list of "K=V"), or ""."""
    for kv in env or ():
        if isinstance(kv, str) and kv.startswith(name + "="):
            return kv[len(name) + 1:]
    return ""


def _flush() -> None:
    """Flush this process's output: the server's (its log) before a fork,
    so that the child does not write it again, or a trial's as it leaves.
    A failure loses only those lines."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _packages() -> list[str]:
    """The third-party top-level packages this process holds."""
    try:
        from batchfit._runtime import hook

        return hook.third_party_packages()
    except Exception:
        return []


def child(req: dict[str, Any], private: tuple[int, ...]) -> None:
    """Become the trial and run its program; never returns."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    _die_with_parent()
    signal.set_wakeup_fd(-1)
    for fd in private:
        try:
            os.close(fd)
        except OSError:
            pass
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _redirect(req["stdout"], req["stderr"])
    os.environ.clear()
    for kv in req["env"]:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    if req.get("cwd"):
        os.chdir(req["cwd"])
    _reseed()
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = list(req["argv"])
    argv = req["argv"][1:]  # without the interpreter
    if argv[0] == "-m":
        code = _run_module(argv[1], argv[2:])
    else:
        code = _run_script(argv[0], argv[1:])
    _exit(code)


def _reseed() -> None:
    """Random state that a fresh process would seed from the OS at import:
    Python's random reseeds itself after a fork, numpy's global generator
    does not, and without this every forked trial would draw the same
    numbers. (torch's default generator has a fixed seed in every process.)"""
    np_random = sys.modules.get("numpy.random")
    seed = getattr(np_random, "seed", None)
    if callable(seed):
        try:
            seed()
        except Exception:
            pass


def _adopt_parent_death(spoiled: int) -> None:
    """In a backup that took over: wait (a few seconds at most) until the
    spoiled server, our parent, has exited and we are re-parented, then die
    with the new parent, as the server did with batchfit. batchfit is a
    child subreaper before it starts a server, so the new parent is
    batchfit; if it died meanwhile, so do we."""
    for _ in range(5000):
        if os.getppid() != spoiled:
            break
        time.sleep(0.001)
    _die_with_parent()
    # Not "the parent we saw before the signal was set": batchfit may have
    # died between the wait and that look, and the parent seen is then
    # init, which never dies (a server that outlived batchfit under load).
    if os.getppid() != _batchfit and (sys.platform.startswith("linux") or not _alive(_batchfit)):
        os._exit(0)  # batchfit died before the signal was set


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return pid > 0


def _die_with_parent() -> None:
    """A fresh trial dies with batchfit (Pdeathsig); a forked one with the
    server, which dies with batchfit."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


def _redirect(stdout: str, stderr: str) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out = os.open(stdout, os.O_WRONLY)
    err = out if stderr == stdout else os.open(stderr, os.O_WRONLY)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in {out, err}:
        if fd > 2:
            os.close(fd)


def _start_hook() -> None:
    """What the adapter's sitecustomize does at start-up in a fresh trial;
    install() does nothing without BATCHFIT_REPORT."""
    try:
        from batchfit._runtime import hook

        hook.install()
    except Exception:
        pass


def _fresh_main() -> types.ModuleType:
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    return main


def _run_script(script: str, args: list[str]) -> int:
    # As the interpreter: argv[0] is the script as given, sys.path[0] its
    # directory, made absolute (symlinks resolved).
    sys.argv[:] = [script] + args
    path = os.path.abspath(script)
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    _start_hook()
    main = _fresh_main()
    try:
        with open(path, "rb") as f:
            source = f.read()
        code = compile(source, path, "exec")
    except BaseException as e:
        return _ended(e)
    from importlib.machinery import SourceFileLoader

    main.__dict__.update(__file__=path, __cached__=None, __spec__=None,
                         __loader__=SourceFileLoader("__main__", path))
    try:
        exec(code, main.__dict__)
    except BaseException as e:
        return _ended(e)
    return 0


def _run_module(module: str, args: list[str]) -> int:
    import runpy

    # As the interpreter: sys.argv[0] is "-m" while start-up code (the hook)
    # runs, and runpy sets it to the module's file once it has found it;
    # sys.path[0] is the working directory.
    sys.argv[:] = ["-m"] + args
    sys.path[0] = os.getcwd()
    _start_hook()
    _fresh_main()
    try:
        # Says "<python>: No module named x" and exits 1 where `python -m`
        # does (SystemExit).
        runpy._run_module_as_main(module, alter_argv=True)  # type: ignore[attr-defined]
    except BaseException as e:
        return _ended(e)
    return 0


def _ended(exc: BaseException) -> int:
    """The exit status the interpreter would give an uncaught exc, printing
    what it would print."""
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF
        try:
            print(code, file=sys.stderr)
        except Exception:
            pass
        return 1
    tb = exc.__traceback__
    # Our own frames are not the program's: a fresh process's traceback
    # starts at the program's module.
    ours = (_ended.__code__.co_filename, _runpy_file())
    while tb is not None and tb.tb_frame.f_code.co_filename in ours:
        tb = tb.tb_next
    exc.__traceback__ = tb  # what the interpreter's printer reads
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = exc
    try:
        sys.excepthook(type(exc), exc, tb)
    except Exception:
        traceback.print_exception(type(exc), exc, tb)
    if isinstance(exc, KeyboardInterrupt):
        return -int(signal.SIGINT)
    return 1


def _runpy_file() -> str:
    import runpy

    return runpy.__file__


def _exit(code: int) -> None:
    """Leave as the interpreter does at the end of a program: wait for
    non-daemon threads, run atexit handlers, flush, exit."""
    try:
        import threading

        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:
        pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    _flush()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def main() -> None:
    global _batchfit
    try:
        _batchfit = int(os.environ.pop("BATCHFIT_FORKSERVER_PARENT", ""))
    except ValueError:
        _batchfit = os.getppid()
    try:
        server = Server()
    except OSError as e:
        print(f"batchfit.forkserver: no channel on fds {REQUESTS_FD}/{REPLIES_FD}: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        from batchfit._runtime import hook

        hook.prepare_for_fork()
    except Exception:
        pass
    server.serve()


if __name__ == "__main__":
    main()
