"""The at-exit report of a batchfit trial.

batchfit runs every trial as a fresh process. Its sitecustomize calls
install() at start-up when BATCHFIT_REPORT names a report file; at interpreter
exit one "exit" event (a JSON line, version 1) is appended to that file with
torch's peak memory counters (or JAX's or TensorFlow's, see
batchfit.frameworks), the device, the time between optimizer steps, whether a
GPU out-of-memory error ended the program and how many the program caught,
and what the program's answer depends on: the source files it loaded and
the files it opened for reading (see opened_files).

When BATCHFIT_STEPS is a positive N, the trial ends after its N-th training
step (see _stop): the exit event is written at once with "stopped": true and
the process exits with status 0. What counts as a step: for torch, a step of
the first optimizer that steps; for JAX, see "JAX: what counts as a step"
below.

Rules this module keeps, because it runs inside someone else's program:

- No framework is imported here (torch, jax, optax, tensorflow). A
  post-import hook notices when the program imports one, and only then are
  its hooks installed.
- Every error of our own is swallowed; the program's behaviour is unchanged
  apart from one torch.cuda.synchronize() per optimizer step (only when CUDA
  is initialized) or one jax.block_until_ready() per JAX step, so that step
  times cover the device work, and the stop after BATCHFIT_STEPS steps.
- Only the process that installed the hook reports: a forked child inherits
  the atexit handler but is not a trial of its own.
"""

import atexit
import functools
import os
import signal
import sys
import threading
import time
import types
import weakref

REPORT_ENV = "BATCHFIT_REPORT"
STEPS_ENV = "BATCHFIT_STEPS"
SOAK_ENV = "BATCHFIT_SOAK"
# Set for trials that run at the same time as others: their share of the
# CPUs (internal/adapter CPUThreadsEnv).
CPU_THREADS_ENV = "BATCHFIT_CPU_THREADS"
EVENT_VERSION = 1
# Begins the line said on stderr when the report cannot be written
# (internal/adapter ReportFailedPrefix): batchfit reads stderr as it comes,
# whatever the disk, and stops rather than judge the trial without it.
REPORT_FAILED = "batchfit adapter: report not written: "

# Bounds that keep one event a reasonable single write even for a long run.
_MAX_STEP_TIMES = 10000
_MAX_EXCEPTION = 1000
_MAX_CHAIN = 100
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


class _State(object):
    def __init__(self):
        self.path = None
        self.pid = None
        self.exception = None
        # Who owns the step count: id() of the first torch optimizer that
        # stepped, or a JAX step function's key (see _jax_step).
        self.optimizer = None
        self.last_step = None
        self.steps = 0
        self.step_times = []
        self.step_peaks = []  # peak bytes after each step, where known
        self.stop_at = 0  # end the program after this many steps; 0: never
        self.reported = False
        self.depth = 0  # nesting of timed step() calls (old torch only)
        self.timing = False  # whether optimizer steps are hooked
        self.script = None  # the script's absolute path, if one runs
        # Absolute paths the program opened for reading, first open first
        # (a dict as an ordered set), less what _watch_opens leaves out.
        self.opened = {}


_state = _State()


def install(path=None):
    """Arrange for an exit event to be appended to path (default: the file
    named by BATCHFIT_REPORT). Returns False, doing nothing, when there is no
    report file or the hook is already installed."""
    if _state.path is not None:
        return False
    path = path or os.environ.get(REPORT_ENV)
    if not path:
        return False
    _state.path = path
    _state.pid = os.getpid()
    _state.stop_at = _steps_from_env()
    _state.script = _script()
    # Registered before the program runs, so it runs after the program's own
    # atexit handlers (atexit is last-in, first-out).
    atexit.register(_at_exit)
    _wrap_excepthook()
    _watch_opens()
    if os.environ.get(SOAK_ENV) == "1":
        _stop_on_sigterm()
    _share_cpus()
    _after_import("torch", _torch_imported)
    _after_import("jax", _jax_imported)
    _after_import("optax", _optax_imported)
    try:
        from batchfit._runtime import frameworks

        frameworks.install(_after_import)
    except Exception:
        pass
    return True


def _share_cpus():
    """Hold the trial's torch to its share of the CPUs when batchfit runs
    others at the same time: OpenMP reads OMP_NUM_THREADS when torch loads
    it, so it is set first (unless the program's environment set it), and
    torch is told once loaded (a trial forked from batchfit's fork server
    loaded it before the trial began)."""
    try:
        n = int(os.environ.get(CPU_THREADS_ENV, ""))
    except ValueError:
        return
    if n < 1:
        return
    os.environ.setdefault("OMP_NUM_THREADS", str(n))

    def limit(torch):
        try:
            torch.set_num_threads(n)
        except Exception:
            pass

    _after_import("torch", limit)


def prepare_for_fork():
    """In batchfit's fork server, before it preloads modules: wrap what
    install() would wrap as soon as the program imports it, where what is
    wrapped could be captured by later imports (a package that does
    `from jax import jit` at import time keeps the function it found). A
    forked trial then sees the same wrapped functions as a fresh one; its
    install() finds them wrapped and leaves them. Counting needs the report
    that install() starts, so nothing is counted in the server."""
    _after_import("jax", _jax_imported)
    _after_import("optax", _optax_imported)


def _stop_on_sigterm():
    """In a --soak trial batchfit ends the program with SIGTERM when the
    soak's time is up. Python's default action would die without a report;
    instead the report (with the per-step peaks) is written and the program
    leaves as after its last step (see _stop). The handler runs between
    bytecodes of the main thread, so after the device work of a call that
    is under way."""
    try:
        signal.signal(signal.SIGTERM, lambda signum, frame: _stop())
    except (ValueError, OSError):
        pass  # not the main thread: the soak ends without a report


def _watch_opens():
    """Remember the files the program opens for reading, through the "open"
    audit event (open(), io.open, os.open, io.open_code), leaving out what
    is no input of the program's own: the standard library, site-packages
    and dist-packages, compiled modules (__pycache__), batchfit's package
    (the adapter), /dev, /proc and /sys. The trial's log folder is not left
    out, as --log-dir may be the program's own folder; batchfit's report
    there is opened to append, never to read. An audit hook cannot be
    removed, so it stays a string test for every other event, and stops
    remembering after _MAX_OPEN_SEEN paths."""
    add_hook = getattr(sys, "addaudithook", None)  # Python 3.8 and later
    if add_hook is None:
        return
    stdlib = os.path.dirname(os.path.abspath(os.__file__))
    ours = _PACKAGE
    prefixes = tuple(p + os.sep for p in (stdlib, ours, "/dev", "/proc", "/sys"))
    parts = tuple(os.sep + p + os.sep for p in ("site-packages", "dist-packages", "__pycache__"))
    seen = _state.opened
    accmode, rdonly = os.O_ACCMODE, os.O_RDONLY

    def audit(event, args):
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


def _steps_from_env():
    """BATCHFIT_STEPS as a step limit: a positive integer, else 0 (the
    program runs to its own end: unset, "0" from --steps 0, or garbage)."""
    try:
        return max(int(os.environ.get(STEPS_ENV, "").strip()), 0)
    except ValueError:
        return 0


def run_to_end():
    """Never stop this process at the step limit. The warm worker calls it:
    it runs many trials in one process, and batchfit counts their steps."""
    _state.stop_at = 0


def _wrap_excepthook():
    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        _state.exception = exc
        return previous(exc_type, exc, tb)

    sys.excepthook = excepthook


class _PostImportFinder(object):
    """A meta path finder that answers only for the module names it watches:
    it finds the real spec through the finders after it and wraps the loader
    so that the name's callbacks run once the module has finished importing.
    It watches "torch", "jax", "optax" and "tensorflow" (so that none is ever
    imported by us) and, should torch not have imported it,
    "torch.optim.optimizer"."""

    def __init__(self):
        self.callbacks = {}
        self._busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.callbacks or self._busy:
            return None
        self._busy = True
        try:
            spec = _find_real_spec(self, fullname, path, target)
            if spec is None or spec.loader is None:
                return None
            if not hasattr(spec.loader, "exec_module"):
                return None
            _wrap_loader(spec.loader, fullname)
            return spec
        except Exception:
            # Let the normal import machinery try, and fail, on its own.
            return None
        finally:
            self._busy = False

    def invalidate_caches(self):
        pass


_finder = _PostImportFinder()


def _after_import(name, callback):
    """Run callback(module) now if name is imported, else once it is. A name
    may have several callbacks; they run in the order they were added."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _finder.callbacks.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def _find_real_spec(me, fullname, path, target):
    for finder in list(sys.meta_path):
        if finder is me:
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _wrap_loader(loader, name):
    current = getattr(loader, "exec_module", None)
    if getattr(current, "_batchfit_wrapped", False):
        return  # a loader shared between specs, wrapped already
    original = current

    def exec_module(module):
        try:
            original(module)
        finally:
            # An instance attribute shadowed the class's method; drop it so the
            # loader is as it was.
            try:
                del loader.exec_module
            except Exception:
                pass
        # One-shot: find_spec may run more often than the module is executed
        # (importlib.util.find_spec("torch"), as libraries do to probe).
        callbacks = _finder.callbacks.pop(name, [])
        if not _finder.callbacks:
            _remove_finder()
        for callback in callbacks:
            try:
                callback(module)
            except Exception:
                pass

    exec_module._batchfit_wrapped = True
    loader.exec_module = exec_module


def _remove_finder():
    try:
        sys.meta_path[:] = [f for f in sys.meta_path if f is not _finder]
    except Exception:
        pass


def _torch_imported(torch):
    """Once the program has imported torch, time its optimizer steps."""
    _after_import("torch.optim.optimizer", _optimizer_module_imported)


def _optimizer_module_imported(module):
    # torch.optim deletes its "optimizer" attribute (torch 2), so the module
    # comes from sys.modules or the import hook, never torch.optim.optimizer.
    if _state.timing:
        return
    _state.timing = True
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if callable(register):  # torch >= 2.0
        register(_step_post_hook)
        return
    _patch_old_optimizer(getattr(module, "Optimizer", None))


def _step_post_hook(optimizer, args, kwargs):
    _on_step(optimizer)


def _patch_old_optimizer(optimizer_class):
    """Before torch 2.0 there is no global step hook. Every Optimizer calls
    _hook_for_profile() from __init__, where torch wraps the class's step() for
    the profiler; we wrap it once more, the same way, to time it."""
    original = getattr(optimizer_class, "_hook_for_profile", None)
    if original is None:
        return

    def _hook_for_profile(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            _time_step_of(type(self))
        except Exception:
            pass
        return result

    optimizer_class._hook_for_profile = _hook_for_profile


def _time_step_of(cls):
    step = getattr(cls, "step", None)
    if step is None or getattr(step, "_batchfit_timed", False):
        return

    @functools.wraps(step)
    def timed_step(*args, **kwargs):
        # Only the outermost call counts: a subclass's step() may call
        # super().step(), which may be timed too.
        _state.depth += 1
        try:
            result = step(*args, **kwargs)
        finally:
            _state.depth -= 1
        if _state.depth == 0 and args:
            _on_step(args[0])
        return result

    timed_step._batchfit_timed = True
    cls.step = timed_step


def _on_step(optimizer):
    """A torch optimizer stepped (torch's global post-hook, or our wrapper of
    step() before torch 2.0)."""
    try:
        if not _owns_steps(id(optimizer)):
            return
        peak = None
        cuda = getattr(sys.modules.get("torch"), "cuda", None)
        if cuda is not None and cuda.is_initialized():
            cuda.synchronize()
            # The peak since the start, so the list rises while memory does;
            # a host-side counter, no device work.
            peak = int(cuda.max_memory_allocated())
        _count_step(peak)
    except Exception:
        pass


def _owns_steps(key):
    """Whether the steps of key (a torch optimizer's id, a JAX step
    function's key) are counted: the first one that steps owns the count. A
    second optimizer (a GAN's, say) would halve the step times and double
    the count."""
    if _state.optimizer is None:
        _state.optimizer = key
    return key == _state.optimizer


def _count_step(peak):
    """One training step has finished (its device work included); peak is
    the framework's peak memory in bytes after it, or None. After the
    BATCHFIT_STEPS-th step the program is stopped."""
    now = time.perf_counter()
    if _state.last_step is not None and len(_state.step_times) < _MAX_STEP_TIMES:
        _state.step_times.append(now - _state.last_step)
    _state.last_step = now
    _state.steps += 1
    if peak is not None and len(_state.step_peaks) < _MAX_STEP_TIMES:
        _state.step_peaks.append(peak)
    # A forked child inherits the count but is not the trial (see _at_exit):
    # only the process that installed the hook is stopped.
    if 0 < _state.stop_at <= _state.steps and os.getpid() == _state.pid:
        _stop()


def _stop():
    """End the trial after its last counted step: write the exit event with
    "stopped", flush the program's output, and leave with status 0 through
    os._exit, running nothing more of the program.

    Why os._exit, and not SystemExit raised from the step hook:

    - The hook runs deep inside the program: inside optimizer.step(), inside
      a framework's training loop. An exception raised there is the
      program's to handle. `except BaseException:` and `finally:` blocks and
      frameworks' error paths (Lightning's teardown and on_exception
      callbacks, a save-on-interrupt callback) would run: they may save a
      checkpoint, evaluate, hang, or swallow it and train on. In a training
      loop on a thread SystemExit would end only that thread.
    - Under torchrun/DDP every rank must stop at the same step, and does:
      each rank counts its own optimizer's steps, and DDP keeps them in
      lockstep (no rank's step N starts before the all-reduce of step N's
      gradients, which needs every rank; GradScaler skips a step on all
      ranks alike, as it reads the reduced gradients). Before stopping, the
      hook has waited for the device (torch.cuda.synchronize() waits for
      every stream, NCCL's too; JAX: block_until_ready on the step's
      outputs), so no collective this rank joined is still in flight. After
      that os._exit leaves nothing that could wait for a peer that has
      already gone: no destroy_process_group() barrier, no atexit handler or
      finally block that talks to other ranks, no process-group destructor.
      With SystemExit, a rank's clean-up could block on peers that left.
      Multi-process JAX is SPMD: every process calls the same jitted step
      function, so every process counts the same steps.
    - What is skipped: the program's atexit handlers, finally blocks and its
      own unflushed files. A trial's output is a log and its result is the
      report; batchfit ends what the trial leaves running (data loader
      workers) with its process group.

    The report is written first and stdout and stderr are flushed, so that
    the log holds everything the program printed."""
    try:
        event = exit_event()
        event["stopped"] = True
        _report(event)
        _state.reported = True
    except Exception:
        pass
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


def _at_exit():
    try:
        if os.getpid() != _state.pid or _state.reported:
            return
        _report(exit_event())
    except Exception:
        pass


def _report(event):
    """Append event to the report; when that fails, say so on stderr as
    REPORT_FAILED describes: a report that is silently missing would let
    batchfit take an OOM the program caught for a trial that fits."""
    try:
        append(_state.path, event)
    except OSError as e:
        for stream in (sys.stderr, sys.__stderr__):
            try:
                stream.flush()
            except Exception:
                pass
        why = e.strerror or str(e)
        line = "\n" + REPORT_FAILED + why + " (errno " + str(e.errno or 0) + "): " + str(_state.path) + "\n"
        try:
            os.write(2, line.encode("utf-8", "replace"))
        except OSError:
            pass


# --- JAX: what counts as a step ----------------------------------------------
#
# JAX has no optimizer object that steps. A training step is a function made
# by jax.jit (or jax.pmap) that computes gradients and applies an optax
# update, called once per step. jax.jit and jax.pmap are wrapped once jax is
# imported, and the update of optax's GradientTransformation once optax is;
# neither is imported by us. A step is:
#
# - one call of a jitted (or pmapped) function whose trace called an optax
#   update (the update of any GradientTransformation: an optimizer, a chain,
#   flax's TrainState.apply_gradients). The call counts when it returns to
#   the program; a call made while another jitted function is being traced
#   is part of that function, not a step. A jitted function that runs several
#   steps inside (lax.scan, fori_loop) counts as one.
# - one call of an optax update made outside any trace (eager). Only the
#   outermost update counts: a chain's inner transformations are part of it.
#
# Not counted: updates traced by a transformation the adapter does not see
# (an update inside jax.grad or lax.scan without jit is traced once, not run
# per step), calls of ahead-of-time compiled functions
# (f.lower(...).compile()), and programs without optax. As for torch, the
# first step function (or eager optimizer) that steps owns the count. Each
# counted step waits for its outputs (jax.block_until_ready), so that step
# times cover the device work and the last step has run before the program
# is stopped.

_jax_local = threading.local()  # .calls: jitted functions being called; .depth: of optax updates
_step_functions = weakref.WeakSet()  # functions whose trace called an optax update


def _jax_calls():
    calls = getattr(_jax_local, "calls", None)
    if calls is None:
        calls = _jax_local.calls = []
    return calls


def _jax_imported(jax):
    for name in ("jit", "pmap"):
        transform = getattr(jax, name, None)
        if callable(transform) and not getattr(transform, "_batchfit_wrapped", False):
            setattr(jax, name, _counting_transform(transform))


def _counting_transform(transform):
    """jax.jit (or pmap) that hands back the jitted function behind a
    _Traced proxy."""

    @functools.wraps(transform)
    def wrapper(*args, **kwargs):
        made = transform(*args, **kwargs)
        if args:
            return _traced(made, args[0])
        if callable(made):
            # jax.jit(static_argnames=...) as a decorator factory (JAX 0.8.1+).
            @functools.wraps(made)
            def decorate(fun, *more, **kw):
                return _traced(made(fun, *more, **kw), fun)

            return decorate
        return made

    wrapper._batchfit_wrapped = True
    return wrapper


def _traced(made, fun):
    if not callable(made) or not callable(fun):
        return made
    try:
        return _Traced(made, fun)
    except Exception:
        return made


class _Traced(object):
    """A jitted (or pmapped) function as the program sees it. Calls go through
    to it, and count as steps once its trace has called an optax update;
    every other attribute (lower, trace, eval_shape, __wrapped__, ...) is the
    jitted function's own. As a class attribute it binds like a method, as
    jax's jitted functions do."""

    def __init__(self, jitted, fun):
        self._batchfit_jitted = jitted
        # Keyed by the function, not this proxy: jax.jit(f) made again (each
        # epoch, say) reuses f's trace without running f, so a new proxy
        # would never see the update.
        self._batchfit_fun = getattr(fun, "__func__", fun)
        self._batchfit_step = False
        functools.update_wrapper(self, jitted, updated=())

    def __getattr__(self, name):
        if name.startswith("_batchfit_"):
            raise AttributeError(name)
        return getattr(self._batchfit_jitted, name)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return repr(self._batchfit_jitted)

    def __call__(self, *args, **kwargs):
        calls = _jax_calls()
        calls.append(self)
        try:
            out = self._batchfit_jitted(*args, **kwargs)
        finally:
            calls.pop()
        if not calls and self._batchfit_is_step():
            _jax_step(("jax", id(self._batchfit_fun)), out)
        return out

    def _batchfit_is_step(self):
        if not self._batchfit_step:
            try:
                self._batchfit_step = self._batchfit_fun in _step_functions
            except TypeError:
                pass
        return self._batchfit_step

    def _batchfit_mark(self):
        self._batchfit_step = True
        try:
            _step_functions.add(self._batchfit_fun)
        except TypeError:
            pass


def _optax_imported(optax):
    for name in ("GradientTransformation", "GradientTransformationExtraArgs"):
        cls = getattr(optax, name, None)
        if not isinstance(cls, type):
            continue
        field = cls.__dict__.get("update")
        # The NamedTuple's field descriptor; subclasses inherit it.
        if field is None or isinstance(field, _UpdateField) or not hasattr(field, "__get__"):
            continue
        cls.update = _UpdateField(field)


class _UpdateField(object):
    """The update field of optax's GradientTransformation: it reads as the
    transformation's update function inside a step counter. Reading through
    the field, rather than wrapping at construction, covers every
    transformation, those made before optax was hooked and by _replace()
    included."""

    def __init__(self, field):
        self._field = field
        self.__doc__ = getattr(field, "__doc__", None)

    def __get__(self, obj, objtype=None):
        fn = self._field.__get__(obj, objtype)
        if obj is None or not callable(fn):
            return fn
        return _counted_update(fn)

    def __set__(self, obj, value):
        self._field.__set__(obj, value)

    def __delete__(self, obj):
        self._field.__delete__(obj)


_update_wrappers = weakref.WeakKeyDictionary()  # for update functions without a __dict__


def _counted_update(fn):
    """fn inside a step counter, the same wrapper every time it is read:
    jax.jit(tx.update) called in a loop must hit jax's cache, keyed by the
    function. The wrapper is kept on fn itself where it can be, so both go
    when the transformation does."""
    if getattr(fn, "_batchfit_update", False):
        return fn
    wrapped = getattr(fn, "_batchfit_counted", None)
    if wrapped is None:
        try:
            wrapped = _update_wrappers.get(fn)
        except TypeError:
            wrapped = None
    if wrapped is not None:
        return wrapped
    try:
        wrapped = _make_counted_update(fn)
    except Exception:
        return fn
    try:
        fn._batchfit_counted = wrapped
    except Exception:
        try:
            _update_wrappers[fn] = wrapped
        except TypeError:
            pass
    return wrapped


def _make_counted_update(fn):
    @functools.wraps(fn)
    def update(*args, **kwargs):
        depth = getattr(_jax_local, "depth", 0)
        _jax_local.depth = depth + 1
        try:
            out = fn(*args, **kwargs)
        finally:
            _jax_local.depth = depth
        if depth == 0:
            _update_returned(fn, args, kwargs, out)
        return out

    update._batchfit_update = True
    return update


def _update_returned(fn, args, kwargs, out):
    """An outermost optax update returned: inside a jitted function's trace,
    that function (the outermost one being called) is a step function;
    outside any trace, the call itself was a step."""
    try:
        calls = _jax_calls()
        if calls:
            calls[0]._batchfit_mark()
        elif not _has_tracer((args, kwargs)):
            _jax_step(("optax", id(fn)), out)
    except Exception:
        pass


def _has_tracer(tree):
    """Whether tree holds a JAX tracer: the update is being traced by
    something the adapter does not see (jax.grad, lax.scan, a jit it did not
    make), so this call is not a step."""
    core = sys.modules.get("jax._src.core") or sys.modules.get("jax.core")
    tracer = getattr(core, "Tracer", None)
    leaves = getattr(sys.modules.get("jax.tree_util"), "tree_leaves", None)
    if not isinstance(tracer, type) or not callable(leaves):
        return False
    return any(isinstance(leaf, tracer) for leaf in leaves(tree))


def _jax_step(key, out):
    """A JAX step returned out: wait for it, then count it."""
    try:
        if not _owns_steps(key):
            return
        jax = sys.modules.get("jax")
        block = getattr(jax, "block_until_ready", None)
        if callable(block):
            block(out)
        else:
            for leaf in jax.tree_util.tree_leaves(out):
                getattr(leaf, "block_until_ready", lambda: None)()
    except Exception:
        # The step failed on the device (out of memory, say): not a step.
        # The program meets the error itself when it reads the result.
        return
    try:
        _count_step(_jax_peak(jax))
    except Exception:
        pass


def _jax_peak(jax):
    """The largest peak_bytes_in_use of the local devices; None where the
    backend keeps no such statistics (the CPU)."""
    try:
        peaks = []
        for device in jax.local_devices():
            stats = device.memory_stats()
            if stats and "peak_bytes_in_use" in stats:
                peaks.append(int(stats["peak_bytes_in_use"]))
        return max(peaks) if peaks else None
    except Exception:
        return None


def exit_event():
    """The exit event for this process as a dict (the JSON object written)."""
    event = {"version": EVENT_VERSION, "event": "exit", "pid": os.getpid()}
    rank = _rank()
    if rank is not None:
        event["rank"] = rank
    exc = _ending_exception()
    if exc is not None:
        try:
            event["exception"] = describe(exc)
            if caused_by_oom(exc):
                event["oom"] = True
        except Exception:
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            event["torch"] = str(torch.__version__)
        except Exception:
            pass
        try:
            event.update(_cuda_memory(torch))
        except Exception:
            pass
    try:
        from batchfit._runtime import frameworks

        event.update(frameworks.exit_fields(event, exc))
    except Exception:
        pass
    if _state.steps:
        event["steps"] = _state.steps
    if _state.step_times:
        event["step_times"] = list(_state.step_times)
    if _state.step_peaks:
        event["step_peaks"] = list(_state.step_peaks)
    try:
        packages = third_party_packages()
        if packages:
            event["packages"] = packages
    except Exception:
        pass
    sources = []
    try:
        sources, truncated = loaded_sources()
        if sources:
            event["sources"] = sources
        if truncated:
            event["sources_truncated"] = True
    except Exception:
        pass
    try:
        opened = opened_files({s["path"] for s in sources})
        if opened:
            event["opened"] = opened
    except Exception:
        pass
    return event


def _script():
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


def third_party_packages():
    """The top-level packages this process imported from site-packages or
    dist-packages, in the order they were first imported: what batchfit's
    fork server may preload. Never the program's own modules, the standard
    library or batchfit's."""
    out, seen = [], set()
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


def is_third_party(path):
    """Whether the file at path belongs to an installed third-party package:
    it lies under a site-packages or dist-packages directory."""
    parts = os.path.abspath(path).split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def loaded_sources():
    """The source files this process loaded outside the standard library,
    site-packages, dist-packages and batchfit's own adapter, as
    ([{"path", "size", "mtime_ns"}], truncated): the script first, then by
    path, at most _MAX_SOURCES. They are only stat'ed: batchfit hashes them,
    so the program's exit stays cheap."""
    import stat

    stdlib = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
    ours = _PACKAGE + os.sep
    paths = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path:
            paths.add(os.path.abspath(path))
    ordered = sorted(paths)
    main = getattr(sys.modules.get("__main__"), "__file__", None) or _state.script
    if isinstance(main, str):
        main = os.path.abspath(main)
        if main in paths:
            ordered.remove(main)
        ordered.insert(0, main)
    out = []
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


def opened_files(loaded):
    """The files this process opened for reading (see _watch_opens), less
    the sources it loaded (loaded: their paths), as [{"path", "size",
    "mtime_ns"}] in the order first opened: regular files of at most
    _MAX_OPENED_BYTES, the first _MAX_OPENED of them. Like the sources they
    are only stat'ed; batchfit hashes them."""
    import stat

    out = []
    for path in list(_state.opened):
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


def _rank():
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            return int(value.strip())
        except ValueError:
            continue
    return None


def _ending_exception():
    if _state.exception is not None:
        return _state.exception
    # The program may have replaced sys.excepthook after us. Python keeps the
    # exception it printed as sys.last_value (sys.last_exc from 3.12); an
    # interactive session sets these for errors it survived, so not there.
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return None
    exc = getattr(sys, "last_exc", None)
    if exc is None:
        exc = getattr(sys, "last_value", None)
    return exc


def _cuda_memory(torch):
    cuda = getattr(torch, "cuda", None)
    # is_initialized() first: it asks nothing of the driver, whereas
    # is_available() might start CUDA at exit in a program that never used it.
    if cuda is None or not cuda.is_initialized() or not cuda.is_available():
        return {}
    index = cuda.current_device()
    out = {"cuda_initialized": True, "device_index": index}
    out["max_memory_allocated"] = int(cuda.max_memory_allocated(index))
    out["max_memory_reserved"] = int(cuda.max_memory_reserved(index))
    try:
        # The cap the allocator kept to: batchfit checks it is the one its
        # memory limit set (a program may set its own).
        out["memory_fraction"] = float(cuda.get_per_process_memory_fraction(index))
    except Exception:
        pass
    try:
        out["device"] = str(cuda.get_device_name(index))
        out["device_total"] = int(cuda.get_device_properties(index).total_memory)
    except Exception:
        pass
    return out


def describe(exc):
    """"Type: first line of the message", as a traceback would name the type."""
    cls = type(exc)
    name = getattr(cls, "__qualname__", None) or cls.__name__
    module = getattr(cls, "__module__", None)
    if module and module not in ("builtins", "__main__"):
        name = module + "." + name
    try:
        message = str(exc).strip()
    except Exception:
        message = "<unprintable>"
    if message:
        name = name + ": " + message.splitlines()[0]
    return name[:_MAX_EXCEPTION]


def caused_by_oom(exc):
    """Whether exc, or an exception it was raised from or while handling, is a
    GPU out-of-memory error of torch, JAX or TensorFlow."""
    seen = set()
    while exc is not None and id(exc) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(exc))
        if is_oom(exc):
            return True
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__
    return False


def is_oom(exc):
    """Whether exc itself is a GPU out-of-memory error of torch, JAX or
    TensorFlow."""
    try:
        from batchfit._runtime import frameworks

        if frameworks.is_oom(exc):
            return True
    except Exception:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        classes = []
        for owner in (torch, getattr(torch, "cuda", None)):
            cls = getattr(owner, "OutOfMemoryError", None)
            if isinstance(cls, type):
                classes.append(cls)
        if classes and isinstance(exc, tuple(classes)):
            return True
    if isinstance(exc, RuntimeError):
        # torch before 1.13 raised a plain RuntimeError; ROCm says HIP.
        message = str(exc)
        return "out of memory" in message and ("CUDA" in message or "HIP" in message)
    return False


def append(path, event):
    """Append event to the report file as one JSON line, in one write on an
    O_APPEND file so that lines from several processes never interleave.
    A write that fails, or takes only part of the line (a disk that fills
    up), raises OSError: what a short write left is retried, so that the
    error the disk gives is the one raised."""
    import errno
    import json

    data = (json.dumps(event, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        while data:
            n = os.write(fd, data)
            if n <= 0:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            data = data[n:]
    finally:
        os.close(fd)
