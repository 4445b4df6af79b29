package forkserver

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// workerModule is batchfit's warm worker, run as `python -m batchfit.worker
// TARGET`.
const workerModule = "batchfit.worker"

// maxSource bounds how much of a script is read for its imports.
const maxSource = 1 << 20

// programFile is the Python file argv runs from dir, and the directory the
// program's own modules are found in (sys.path[0]): the script and its
// directory for `python script.py`; for `python -m module`, the module's
// file under dir if it lies there (a.b is a/b.py, or a/b/__main__.py for a
// package), else "", and dir. Installed modules are not looked for.
func programFile(argv []string, dir string) (file, home string) {
	if len(argv) >= 4 && argv[1] == "-m" && argv[2] == workerModule {
		// batchfit's own warm worker runs the user's trial, FILE:Class or
		// module:Class: that is the program whose imports matter.
		target, _, _ := strings.Cut(argv[3], ":")
		if strings.HasSuffix(target, ".py") {
			return programFile([]string{argv[0], target}, dir)
		}
		base := filepath.Join(dir, filepath.FromSlash(strings.ReplaceAll(target, ".", "/")))
		return firstFile(base+".py", filepath.Join(base, "__init__.py")), dir
	}
	if argv[1] != "-m" {
		file = argv[1]
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if real, err := filepath.EvalSymlinks(file); err == nil {
			file = real
		}
		return file, filepath.Dir(file)
	}
	base := filepath.Join(dir, filepath.FromSlash(strings.ReplaceAll(argv[2], ".", "/")))
	return firstFile(base+".py", filepath.Join(base, "__main__.py")), dir
}

// firstFile is the first of files that is a regular file, or "".
func firstFile(files ...string) string {
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			return f
		}
	}
	return ""
}

// scriptImports are the top-level names the program that argv runs imports
// in its own file, in order: the first dotted component of each
// `import a.b` and `from a.b import c`, relative imports left out. It is a
// line scan, not Python's parser: comments and string literals (triple
// quoted ones across lines too) are skipped, statements joined by `;` and
// backslash continuations are split and joined, and an import anywhere (in
// a function, a try, an if) counts. It misses imports after a colon on the
// same line (`if x: import y`), imports made through importlib or
// __import__, and what the program's own modules import: those are learned
// from the first trial's report instead. The names are only candidates: the
// server imports a name only if it is a third-party package.
func scriptImports(argv []string, dir string) []string {
	file, _ := programFile(argv, dir)
	if file == "" {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxSource))
	if err != nil {
		return nil
	}
	var out []string
	for _, stmt := range statements(string(src)) {
		for _, name := range importedNames(stmt) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// statements splits Python source into simple statements without their
// comments and with every string literal emptied (`"..."` becomes `""`),
// one per logical line or `;`, continuation lines joined.
func statements(src string) []string {
	var out []string
	var cur strings.Builder
	end := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	depth := 0 // open brackets: a newline inside them continues the line
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i-- // the newline ends the line below
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i++
			cur.WriteByte(' ')
		case c == '\\' && i+2 < len(src) && src[i+1] == '\r' && src[i+2] == '\n':
			i += 2
			cur.WriteByte(' ')
		case c == '"' || c == '\'':
			i = stringEnd(src, i)
			cur.WriteString(`""`)
		case c == '(' || c == '[' || c == '{':
			depth++
			cur.WriteByte(c)
		case c == ')' || c == ']' || c == '}':
			depth = max(depth-1, 0)
			cur.WriteByte(c)
		case c == '\n' && depth > 0:
			cur.WriteByte(' ')
		case c == '\n' || c == ';':
			end()
		default:
			cur.WriteByte(c)
		}
	}
	end()
	return out
}

// stringEnd is the index of the last byte of the string literal whose
// opening quote is at src[i] (the end of src when it is not closed).
func stringEnd(src string, i int) int {
	q := src[i]
	triple := strings.HasPrefix(src[i:], strings.Repeat(string(q), 3))
	j := i + 1
	if triple {
		j = i + 3
	}
	for ; j < len(src); j++ {
		switch {
		case src[j] == '\\':
			j++ // escapes the next byte, in raw strings too as far as the end is concerned
		case !triple && src[j] == '\n':
			return j - 1 // unterminated: the line ends it
		case src[j] == q && (!triple || strings.HasPrefix(src[j:], strings.Repeat(string(q), 3))):
			if triple {
				return j + 2
			}
			return j
		}
	}
	return len(src) - 1
}

// importedNames are the top-level names stmt imports, if it is an import.
func importedNames(stmt string) []string {
	fields := strings.Fields(stmt)
	if len(fields) < 2 {
		return nil
	}
	switch fields[0] {
	case "from":
		if name := topLevel(fields[1]); name != "" && len(fields) > 2 && fields[2] == "import" {
			return []string{name}
		}
	case "import":
		var out []string
		for _, part := range strings.Split(strings.Join(fields[1:], " "), ",") {
			part, _, _ = strings.Cut(strings.TrimSpace(part), " ")
			if name := topLevel(part); name != "" {
				out = append(out, name)
			}
		}
		return out
	}
	return nil
}

// topLevel is the first component of a dotted module name, or "" when it
// is relative (`.x`) or not a name.
func topLevel(module string) string {
	name, _, _ := strings.Cut(module, ".")
	if name == "" || !isIdentifier(name) {
		return ""
	}
	return name
}

// isIdentifier reports whether s is an ASCII Python identifier (non-ASCII
// module names are rare enough to leave to the first trial's report).
func isIdentifier(s string) bool {
	for i, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}
