"""batchfit's in-trial hook, under its public name: the adapter's
sitecustomize imports it, and so may a program that installs the hook itself
(``from batchfit import hook; hook.install()``). The code lives in
batchfit._runtime.hook."""

from batchfit._runtime.hook import (
    CPU_THREADS_ENV,
    EVENT_VERSION,
    REPORT_ENV,
    REPORT_FAILED,
    SOAK_ENV,
    STEPS_ENV,
    append,
    caused_by_oom,
    describe,
    exit_event,
    install,
    is_oom,
    is_third_party,
    loaded_sources,
    opened_files,
    prepare_for_fork,
    run_to_end,
    third_party_packages,
)

__all__ = [
    "CPU_THREADS_ENV", "EVENT_VERSION", "REPORT_ENV", "REPORT_FAILED", "SOAK_ENV", "STEPS_ENV",
    "append", "caused_by_oom", "describe", "exit_event", "install", "is_oom", "is_third_party",
    "loaded_sources", "opened_files", "prepare_for_fork", "run_to_end", "third_party_packages",
]
