"""The hook's state in a trial process: the report file, the step count and
what the report lists, shared by the modules that fill it."""

from __future__ import annotations


class State:
    """One per process (state). A plain class, not a dataclass: the hook
    loads in every trial at start-up, and dataclasses would import inspect
    into every program for nothing."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.pid: int | None = None
        self.exception: BaseException | None = None
        # Who owns the step count: id() of the first torch optimizer that
        # stepped, or a JAX step function's key (see jax_steps).
        self.optimizer: object = None
        self.last_step: float | None = None
        self.steps = 0
        self.step_times: list[float] = []
        self.step_peaks: list[int] = []  # peak bytes after each step, where known
        self.stop_at = 0  # end the program after this many steps; 0: never
        self.reported = False
        # Whether the program took its batch size from batchfit.batch_size().
        self.size_read = False
        self.depth = 0  # nesting of timed step() calls (old torch only)
        self.timing = False  # whether optimizer steps are hooked
        self.script: str | None = None  # the script's absolute path, if one runs
        # Absolute paths the program opened for reading, first open first
        # (a dict as an ordered set), less what sources.watch_opens leaves out.
        self.opened: dict[str, None] = {}


state = State()
