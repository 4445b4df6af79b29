"""Two trials side by side on one GPU: does CPU thread oversubscription slow
them down, and does splitting the CPU threads between them help? Runs the
Lightning example (the zoo's command, capped at 24 GiB) alone, then two at
once with the default threads, then two at once with OMP_NUM_THREADS set to
half the CPUs; prints each process's wall seconds.

    python3 bench/probes/shared_threads.py [SIZE]
"""

import os
import subprocess
import sys
import time

size = sys.argv[1] if len(sys.argv) > 1 else "2003"
total = int(subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                           capture_output=True, text=True).stdout.split()[0]) * 2**20
fraction = 24 * 2**30 / total
cmd = [sys.executable, "examples/lightning_resnet/train.py", "fit", "--data.batch_size", size, "--trainer.precision",
       "16-mixed", "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
       "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false", "--trainer.max_steps", "3"]


def batch(n, extra):
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=f"per_process_memory_fraction:{fraction}", **extra)
    t0 = time.monotonic()
    ps = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    out = []
    for p in ps:
        _, err = p.communicate()
        out.append((p.returncode, round(time.monotonic() - t0, 1), err.strip().splitlines()[-1:] if p.returncode else ""))
    return out


half = str(max(1, os.cpu_count() // 2))
print("cpus", os.cpu_count(), "size", size)
print("alone            ", batch(1, {}))
print("two, default     ", batch(2, {}))
print(f"two, OMP {half:>2}      ", batch(2, {"OMP_NUM_THREADS": half}))
print("two, OMP 1       ", batch(2, {"OMP_NUM_THREADS": "1"}))
