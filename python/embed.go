// Package python embeds batchfit's Python adapter (the batchfit package and
// its start-up hook) so that the Go binary can install it for every trial
// without a pip install. go:embed cannot reach parent directories, which is
// why this file sits beside the package rather than in internal/adapter.
package python

import "embed"

// FS holds the tree batchfit/... ("all:" because __init__.py and _hook start
// with an underscore). It may hold __pycache__ files left by a local run;
// the installer skips them.
//
//go:embed all:batchfit
var FS embed.FS
