# Trains with the stand-in TensorFlow (testdata/faketf): asks for memory
# growth, as TensorFlow scripts commonly do, then allocates 64 MiB on every
# GPU and 128 MiB more on GPU 0, and ends as the mode says.
import sys

import tensorflow as tf

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if mode == "import-only":
    sys.exit(0)
for gpu in tf.config.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(gpu, True)
for i in range(len(tf.config.list_physical_devices("GPU"))):
    tf.allocate([16, 1024, 1024], device=i)
tf.allocate([32, 1024, 1024])
if mode == "oom":
    tf.allocate([1024, 1024, 1024])
if mode == "caught":
    try:
        tf.allocate([1024, 1024, 1024])
    except tf.errors.ResourceExhaustedError:
        print("skipped a batch")
