"""batchfit's preloading fork server, under its public name: batchfit starts
it as python3 -m batchfit.forkserver. The code, and the protocol it speaks,
live in batchfit._runtime.forkserver."""

from batchfit._runtime.forkserver import (
    REPLIES_FD,
    REQUESTS_FD,
    Server,
    fork_hazard,
    gpu_state,
    main,
    third_party,
    thread_count,
    thread_hazard,
)

__all__ = [
    "REPLIES_FD", "REQUESTS_FD", "Server", "fork_hazard", "gpu_state", "main", "third_party",
    "thread_count", "thread_hazard",
]

if __name__ == "__main__":
    main()
