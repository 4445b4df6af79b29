// Package examples holds real training workloads for batchfit, as Python
// programs in the folders beside this file: simclr_resnet50 (the workload of
// the question batchfit answers) and transformer_lm. The package has no Go
// code of its own; its tests smoke-test each workload on the CPU under the
// adapter's hook, so that CI notices when one stops running.
package examples
