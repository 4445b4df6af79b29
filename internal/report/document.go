package report

import (
	"github.com/batchfit/batchfit/internal/record"
)

// SchemaVersion is the version of the JSON document every --json prints
// (docs/json.md, docs/batchfit.schema.json). It changes only when a key
// changes meaning or goes away; new keys come without a new version.
const SchemaVersion = 1

// Document is the one JSON document every --json prints, whatever the
// command and however it ended: the runs it has (none, one, one per GPU
// model, or the history's), the doctor's report for batchfit doctor, and
// the error batchfit exits with, null when it exits 0.
type Document struct {
	SchemaVersion int           `json:"schema_version"`
	Runs          []*record.Run `json:"runs"`
	// Doctor is batchfit doctor's report (a *doctor.Report), null for
	// every other command.
	Doctor any            `json:"doctor"`
	Error  *DocumentError `json:"error"`
}

// DocumentError is the error a command ended with: what stderr says, and
// the exit code.
type DocumentError struct {
	Message  string  `json:"message"`
	Hint     *string `json:"hint"`
	ExitCode int     `json:"exit_code"`
}

// NewDocument returns an empty document: no runs, no error.
func NewDocument() *Document {
	return &Document{SchemaVersion: SchemaVersion, Runs: []*record.Run{}}
}
