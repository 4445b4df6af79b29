// Command batchfit finds the largest batch size a training command can run
// at on a GPU, exactly, with every trial in an isolated process.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
