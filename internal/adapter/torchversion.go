package adapter

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// TorchVersion asks the command's Python interpreter which torch is
// installed, without importing it (importlib.metadata reads the package's
// metadata in a few milliseconds). It returns "" when the interpreter cannot
// be found or torch is not installed: the version is a fingerprint input,
// not a requirement.
func TorchVersion(ctx context.Context, argv []string) string {
	py := interpreterOf(argv)
	if py == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c",
		"import importlib.metadata as m\ntry:\n print(m.version('torch'))\nexcept Exception:\n pass").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// interpreterOf finds the Python interpreter a command runs: the command
// itself when it is one, else the one its #! line names (torchrun,
// accelerate and other console scripts).
func interpreterOf(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return ""
	}
	if interpreterName(filepath.Base(path)) {
		return path
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if !strings.HasPrefix(line, "#!") || len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		fields = fields[1:]
	}
	if interpreterName(filepath.Base(fields[0])) {
		if p, err := exec.LookPath(fields[0]); err == nil {
			return p
		}
	}
	return ""
}
