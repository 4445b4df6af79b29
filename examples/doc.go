// Package examples holds real training workloads for batchfit, as Python
// programs in the folders beside this file: simclr_resnet50 (the SimCLR
// workload whose in-process search the README describes),
// transformer_lm, caught_oom (a script that catches its own out-of-memory
// error), jax_optax, hf_trainer and lightning_resnet (whose oneline.py
// scripts find their own batch size with batchfit.batch_size() and the
// BatchFit callback, then train at it). The package has no Go
// code of its own; its tests smoke-test each PyTorch workload on the CPU,
// under the adapter's hook where batchfit would run it, so that CI notices
// when one stops running. JAX, transformers and Lightning are not installed
// where CI runs, so their scripts are only compiled there. python_api is
// not a workload but the Python API run on the simulated GPU; go test
// ./python runs it.
package examples
