package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/batchfit/batchfit/internal/record"
)

// Fingerprint identifies the question a run answers: two runs with the same
// fingerprint must find the same batch size, so the newer one can be answered
// from the older. It is the lowercase hex SHA-256 of the canonical encoding
// below, which is part of the database format: a line's meaning never
// changes; a change of meaning is a new version line (and then misses the
// old cache, while CommandKey still finds old runs to seed a search).
//
// The encoding is a sequence of lines, each ending in "\n". A string s is
// written as len(s) in decimal, ":", then the bytes of s unchanged (so any
// byte, newlines included, is unambiguous); numbers are decimal; booleans are
// 0 or 1. Version 1, the lines in this order:
//
//	batchfit fingerprint v1
//	command <number of arguments>
//	<string>                      one line per argument, {} kept as is
//	dir <string>                  the working directory, as recorded
//	gpus <number of devices>
//	gpu <name string> <total bytes> <driver string>   one line per device, in recorded order
//	memory_limit <bytes>          0 when unset
//	steps <n>
//	torch <string>                version the adapter reported, "" if none
//	min <n>
//	max <n>
//	multiple_of <n>
//	simulated <0|1>
//
// Version 2 is "batchfit fingerprint v2" and the lines of
// version 1 after its first, followed by what runs (record.Inputs):
//
//	files <n>
//	<path string> <hash string>   one line per file named in the arguments, in argument order
//	git <0|1>                     1 when the directory is in a git repository
//	<commit string> <diff string> only when git is 1
//	env <n>
//	<string>                      one line per NAME=VALUE, sorted
//
// Version 3 is "batchfit fingerprint v3" and the lines of version 2 after
// its first, followed by
//
//	memory_limit_scope <string>   "process" (the limit holds for the whole
//	                              process) or "allocator" (only the
//	                              allocator is capped), "" without a limit
//
// Runs of earlier versions capped the allocator only.
//
// Version 4 is "batchfit fingerprint v4" and the lines of version 3 after
// its first, followed by the program that runs (Inputs.Executable), which
// a command that names it through PATH does not show:
//
//	executable <0|1>              1 when it was found
//	<path string> <hash string>   only when executable is 1
//
// Version 5 is "batchfit fingerprint v5" and the lines of version 4 after
// its first. Its lines mean what they did; the answer to them changed:
// under a whole-process limit it is proven on a held card
// (record.ProofHeld), which a capped trial could beat by a size or two,
// and XLA's pool is the named card's (75 % of it by default), not the
// whole limit. A run proven capped under a whole-process limit is never
// a cached answer (Store.Cached).
//
// Version 6, written now, is "batchfit fingerprint v6" and the lines of
// version 5 after its first, followed by --worst-case, which decides
// which batches a trial of a program whose shapes vary meets (its
// largest first, or the program's first few):
//
//	worst_case <string>           "on" or "off"
//
// Runs of earlier versions ran the program's first batches, as "off"
// does, and say nothing of their shapes.
//
// The files the program loaded (Inputs.Loaded) are not in it: they are
// known only after a trial, and are hashed again when a cached answer is
// looked up.
//
// Values are taken as recorded; the caller records effective values (after
// defaults), so "--steps 3" and a default of 3 agree. Left out on purpose,
// because they change how the answer is found but not what it is: strategy,
// start, confirm, margin, parallel, the torch hook switch, GPU UUIDs and
// indices, and everything about the outcome. The timeout changes the answer
// only through trials that timed out or came near it, so it is not in the
// key either: the cached run's trials are held against the new timeout when
// it is looked up. Simulated is in, beyond the settings, so a demo answer
// never stands in for a real GPU's.
func Fingerprint(r *record.Run) string {
	return digest(fingerprintText(r, fingerprintVersion))
}

// CommandKey identifies the workload regardless of where it runs: the command
// and the working directory. A found run with the same key on another GPU or
// limit is a good starting point for a new search. It is the hex SHA-256 of
//
//	batchfit command v1
//	command <number of arguments>
//	<string>                      one line per argument
//	dir <string>
//
// in the encoding Fingerprint describes.
func CommandKey(r *record.Run) string {
	var c canon
	c.line("batchfit command v1")
	c.command(r)
	return digest(c.b)
}

// fingerprintVersion is the version Fingerprint writes.
const fingerprintVersion = 6

func fingerprintText(r *record.Run, version int) []byte {
	var c canon
	c.line("batchfit fingerprint v" + strconv.Itoa(version))
	c.command(r)
	var devices int
	if r.GPU != nil {
		devices = len(r.GPU.Devices)
	}
	c.field("gpus").num(int64(devices)).end()
	for i := 0; i < devices; i++ {
		d := r.GPU.Devices[i]
		c.field("gpu").str(d.Name).space().unum(d.Total).space().str(d.Driver).end()
	}
	c.field("memory_limit").unum(r.Settings.MemoryLimit).end()
	c.field("steps").num(int64(r.Settings.Steps)).end()
	c.field("torch").str(r.Torch).end()
	c.field("min").num(int64(r.Settings.Min)).end()
	c.field("max").num(int64(r.Settings.Max)).end()
	c.field("multiple_of").num(int64(r.Settings.MultipleOf)).end()
	sim := int64(0)
	if r.Simulated {
		sim = 1
	}
	c.field("simulated").num(sim).end()
	if version >= 2 {
		c.inputs(r.Inputs)
	}
	if version >= 3 {
		c.field("memory_limit_scope").str(r.Settings.MemoryLimitScope).end()
	}
	if version >= 4 {
		c.executable(r.Inputs)
	}
	// Version 5 adds no line (see Fingerprint).
	if version >= 6 {
		c.field("worst_case").str(r.Settings.WorstCase).end()
	}
	return c.b
}

func (c *canon) inputs(in *record.Inputs) {
	if in == nil {
		in = &record.Inputs{}
	}
	c.field("files").num(int64(len(in.Files))).end()
	for _, f := range in.Files {
		c.str(f.Path).space().str(f.Hash).end()
	}
	if in.Git == nil {
		c.field("git").num(0).end()
	} else {
		c.field("git").num(1).end()
		c.str(in.Git.Commit).space().str(in.Git.Diff).end()
	}
	c.field("env").num(int64(len(in.Env))).end()
	for _, kv := range in.Env {
		c.str(kv).end()
	}
}

func (c *canon) executable(in *record.Inputs) {
	if in == nil || in.Executable == nil {
		c.field("executable").num(0).end()
		return
	}
	c.field("executable").num(1).end()
	c.str(in.Executable.Path).space().str(in.Executable.Hash).end()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canon builds the canonical encoding.
type canon struct{ b []byte }

func (c *canon) line(s string) { c.b = append(append(c.b, s...), '\n') }

func (c *canon) command(r *record.Run) {
	c.field("command").num(int64(len(r.Command))).end()
	for _, a := range r.Command {
		c.str(a).end()
	}
	c.field("dir").str(r.Dir).end()
}

func (c *canon) field(name string) *canon {
	c.b = append(append(c.b, name...), ' ')
	return c
}

func (c *canon) str(s string) *canon {
	c.b = strconv.AppendInt(c.b, int64(len(s)), 10)
	c.b = append(append(c.b, ':'), s...)
	return c
}

func (c *canon) num(n int64) *canon   { c.b = strconv.AppendInt(c.b, n, 10); return c }
func (c *canon) unum(n uint64) *canon { c.b = strconv.AppendUint(c.b, n, 10); return c }
func (c *canon) space() *canon        { c.b = append(c.b, ' '); return c }
func (c *canon) end()                 { c.b = append(c.b, '\n') }
