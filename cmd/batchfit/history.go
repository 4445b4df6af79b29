package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batchfit/batchfit/internal/leftover"
	"github.com/batchfit/batchfit/internal/outfile"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/report"
	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/store"
)

// dbOptions choose the history database.
type dbOptions struct {
	path string
	none bool
	// stderr is where the trials a killed batchfit left running are
	// reported as they are stopped, when the database is opened.
	stderr io.Writer
}

func (d *dbOptions) register(fs *pflag.FlagSet, withNone bool) {
	fs.StringVar(&d.path, "db", "", "the history's file (default: $XDG_CACHE_HOME/batchfit/batchfit.db)")
	if withNone {
		fs.BoolVar(&d.none, "no-db", false, "neither read nor write the history: no answer from it, nothing recorded (not even the trials running, which a later batchfit stops if this one is killed)")
	}
}

// history is the history a search reads and writes: store.Null with
// --no-db.
type history interface {
	runner.Store
	Close() error
}

// openForReading opens the database file for a command that only reads
// it. Where it cannot be opened for writing (a read-only file system, a
// file or folder of someone else's) it is opened read-only, and the trials
// a killed batchfit left running are not looked for: stopping them is a
// write.
func (d *dbOptions) openForReading(ctx context.Context) (*store.Store, error) {
	s, err := d.openFile(ctx)
	if err == nil || errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrNewer) || errors.Is(err, store.ErrLocked) {
		return s, err
	}
	path, perr := d.filePath()
	if perr != nil {
		return nil, err
	}
	ro, rerr := store.OpenReadOnly(ctx, path)
	if rerr != nil {
		return nil, err
	}
	return ro, nil
}

// files are the history's files, which no output may overwrite: the
// database and the side files SQLite keeps beside it. None with --no-db.
func (d *dbOptions) files() []outfile.Named {
	if d.none {
		return nil
	}
	path, err := d.filePath()
	if err != nil {
		return nil // opening the history reports it
	}
	const flag = "the history (--db)"
	var out []outfile.Named
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		out = append(out, outfile.Named{Flag: flag, Path: path + suffix})
	}
	return out
}

// open returns the history, or store.Null with --no-db.
func (d *dbOptions) open(ctx context.Context) (history, error) {
	if d.none {
		return store.Null{}, nil
	}
	return d.openFile(ctx)
}

// filePath is the database file's path: --db, or the default.
func (d *dbOptions) filePath() (string, error) {
	if d.path != "" {
		return d.path, nil
	}
	p, err := store.DefaultPath()
	if err != nil {
		return "", &exitErr{code: exitError, err: err, hint: "pass --db PATH, or --no-db to search without the history"}
	}
	return p, nil
}

// openFile opens the database file.
func (d *dbOptions) openFile(ctx context.Context) (*store.Store, error) {
	path, err := d.filePath()
	if err != nil {
		return nil, err
	}
	s, err := store.Open(ctx, path)
	if err != nil {
		return nil, historyError("open the history", err)
	}
	if d.stderr != nil {
		leftover.Stop(ctx, s, d.stderr)
	}
	return s, nil
}

// historyError is err from the history while doing what, with a hint for
// each way the file can fail: held by another batchfit, damaged, or
// anything else.
func historyError(what string, err error) error {
	hint := "pass --no-db to search without the history, or --db PATH to use another file"
	switch {
	case errors.Is(err, store.ErrLocked):
		hint = "another batchfit is writing to it; wait for it, or " + hint
	case errors.Is(err, store.ErrCorrupt):
		hint = "move the file away to start a new history, or " + hint
	}
	return &exitErr{code: exitError, err: fmt.Errorf("%s: %w", what, err), hint: hint}
}

func newHistoryCommand(io *streams) *cobra.Command {
	db := dbOptions{stderr: io.stderr}
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List past searches: the history, which also answers repeated ones",
		Long: `List past searches, newest first. The history is one SQLite file (--db;
default $XDG_CACHE_HOME/batchfit/batchfit.db) that records every search and
its trials. A later search of an unchanged command is answered from it
(--history-max-age, --history-env, --fresh); 'batchfit history clear' stops
that, and 'batchfit show RUN' shows one run again.`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usageError("give --limit a number of runs, or 0 for all", "--limit must not be negative, got %d", limit)
			}
			s, err := db.openForReading(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			runs, err := s.List(cmd.Context(), limit)
			if err != nil {
				return historyError("read the history", err)
			}
			if asJSON {
				doc := io.document()
				for i := range runs {
					doc.Runs = append(doc.Runs, &runs[i])
				}
				return nil
			}
			return report.WriteHistory(io.stdout, runs)
		}),
	}
	db.register(cmd.Flags(), false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runs as one JSON document (docs/json.md)")
	cmd.Flags().IntVarP(&limit, "limit", "n", 20, "show at most this many runs (0: all)")
	cmd.AddCommand(newClearCommand(io, ""))
	return cmd
}

func newShowCommand(io *streams) *cobra.Command {
	db := dbOptions{stderr: io.stderr}
	var out outputOptions
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show one past search, and write its report again",
		Long: `Show one past search, and write its report again.

RUN is a run's id as 'batchfit history' lists it (a unique prefix is
enough), or "latest" for the newest run.`,
		Example:           "  batchfit show latest\n  batchfit show 1m8pz --report run.html",
		ValidArgsFunction: db.runIDs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("give a run id from 'batchfit history' (a unique prefix is enough), or latest", "show needs one run id")
			}
			if err := out.check(db.files()...); err != nil {
				return err
			}
			s, err := db.openForReading(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			run, err := getRun(cmd.Context(), s, args[0])
			switch {
			case errors.Is(err, store.ErrNotFound) && args[0] == "latest":
				return usageError("run a search first: batchfit search -- python train.py --batch-size {}", "the history has no runs")
			case errors.Is(err, store.ErrNotFound):
				return usageError("list the runs with 'batchfit history'", "no run %q", args[0])
			case errors.Is(err, store.ErrAmbiguous):
				return usageError("give more characters of the run id", "run id %q matches several runs", args[0])
			case err != nil:
				return historyError("read the history", err)
			}
			if err := out.write(run, false); err != nil {
				return err
			}
			if out.json {
				io.document().Runs = []*record.Run{run}
				return nil
			}
			return report.WriteSummary(io.stdout, run)
		}),
	}
	db.register(cmd.Flags(), false)
	out.register(cmd.Flags())
	cmd.Flags().BoolVar(&out.json, "json", false, "print the run as one JSON document (docs/json.md)")
	return cmd
}

// getRun returns the run named by id: an id or a unique prefix of one, or
// "latest", the newest run.
func getRun(ctx context.Context, s *store.Store, id string) (*record.Run, error) {
	if id != "latest" {
		return s.Get(ctx, id)
	}
	runs, err := s.List(ctx, 1)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("the newest run: %w", store.ErrNotFound)
	}
	return &runs[0], nil
}

// outputOptions are the files a run can be written to.
type outputOptions struct {
	reportPath string
	plotPath   string
	json       bool
}

func (o *outputOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.reportPath, "report", "", "write a self-contained HTML report of the run to this file")
	fs.StringVar(&o.plotPath, "plot", "", "write the memory chart to this .png or .svg file")
}

// check catches bad output paths before any trial runs (outfile.Check):
// no output may be one of the files in kept (the history and its side
// files, the log folder) or the other output, however the paths are spelt:
// a report written over the history destroys every run in it.
func (o *outputOptions) check(kept ...outfile.Named) error {
	outputs := []outfile.Named{{Flag: "--report", Path: o.reportPath}, {Flag: "--plot", Path: o.plotPath}}
	if err := outfile.Distinct(append(outputs, kept...)...); err != nil {
		return err
	}
	examples := []string{"batchfit.html", "batchfit.png"}
	for i, p := range outputs {
		if p.Path == "" {
			continue
		}
		if err := outfile.Check(p, examples[i]); err != nil {
			return err
		}
	}
	if o.plotPath != "" {
		switch strings.ToLower(filepath.Ext(o.plotPath)) {
		case ".png", ".svg":
		default:
			return usageError("name the file .png or .svg", "--plot %s: unknown image format", o.plotPath)
		}
	}
	return nil
}

// write writes the report and the plot, each whole or not at all. With
// several runs (one per GPU model) each file name gets the model's name.
func (o *outputOptions) write(run *record.Run, perModel bool) error {
	name := func(path string) string {
		if !perModel || run.GPU == nil || len(run.GPU.Devices) == 0 {
			return path
		}
		return outfile.WithSuffix(path, run.GPU.Devices[0].Name)
	}
	if o.reportPath != "" {
		err := outfile.WriteAtomic(name(o.reportPath), func(w io.Writer) error { return report.WriteHTML(w, run) })
		if err != nil {
			return outputError("write the report", "--report", run, err)
		}
	}
	if o.plotPath != "" {
		if err := report.WritePlotFile(name(o.plotPath), run); err != nil {
			return outputError("write the plot", "--plot", run, err)
		}
	}
	return nil
}

// outputError is a failure to write an output at the end of a run (the
// folder checked before the first trial was removed, the disk filled),
// with how to get the output without running the search again.
func outputError(what, flag string, run *record.Run, err error) error {
	hint := "the run was not recorded (--no-db): search again with " + flag + " in a folder you can write to"
	if run.ID != "" {
		hint = fmt.Sprintf("the run is in the history: batchfit show %s %s PATH writes it again", run.ID, flag)
	}
	return &exitErr{code: exitError, err: fmt.Errorf("%s: %w", what, err), hint: hint}
}
