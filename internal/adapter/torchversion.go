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
	for _, d := range installed(ctx, argv, "torch") {
		return d.version
	}
	return ""
}

// Versions is, like TorchVersion, what the command's interpreter has
// installed of the distributions named: "name version" for each one that is,
// joined by ", " ("jax 0.4.30, jaxlib 0.4.30"); "" when none is.
func Versions(ctx context.Context, argv []string, dists ...string) string {
	var out []string
	for _, d := range installed(ctx, argv, dists...) {
		out = append(out, d.name+" "+d.version)
	}
	return strings.Join(out, ", ")
}

type dist struct{ name, version string }

// versionScript prints "name version" for each distribution named in its
// arguments that is installed.
const versionScript = `import importlib.metadata as m, sys
for d in sys.argv[1:]:
    try:
        print(d, m.version(d))
    except Exception:
        pass`

func installed(ctx context.Context, argv []string, dists ...string) []dist {
	py := interpreterOf(argv)
	if py == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, append([]string{"-c", versionScript}, dists...)...).Output()
	if err != nil {
		return nil
	}
	var found []dist
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if name, version, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			found = append(found, dist{name, version})
		}
	}
	return found
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
