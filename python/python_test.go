package python

import (
	"archive/zip"
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batchfit/batchfit/internal/testutil"
)

// dist holds what scripts/wheel --host built, once for the package's tests.
var dist struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dist.dir != "" {
		os.RemoveAll(dist.dir)
	}
	os.Exit(code)
}

// release builds this machine's binary and wheel with scripts/wheel --host
// and returns the folder that holds them.
func release(t *testing.T) string {
	t.Helper()
	py := python(t)
	dist.once.Do(func() {
		if dist.dir, dist.err = os.MkdirTemp("", "batchfit-dist-"); dist.err != nil {
			return
		}
		out, err := exec.Command(py, "../scripts/wheel", "--host", "--out", dist.dir).CombinedOutput()
		if err != nil {
			dist.err = fmt.Errorf("scripts/wheel --host: %v\n%s", err, out)
		}
	})
	if dist.err != nil {
		t.Fatal(dist.err)
	}
	return dist.dir
}

// TestPythonAPI runs the Python package's unit tests (python/tests: the API,
// scripts/wheel's parts, batchfit.apply), the API's end to end too: through
// the released binary, on its simulated GPU.
func TestPythonAPI(t *testing.T) {
	py := python(t)
	bin := filepath.Join(release(t), "batchfit_"+runtime.GOOS+"_"+runtime.GOARCH, "batchfit")
	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Env = append(os.Environ(), "BATCHFIT_TEST_BINARY="+bin, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest: %v\n%s", err, out)
	}
	t.Logf("%s", out)

	// A real notebook, executed by Jupyter's own machinery: the live view
	// and the report inline, screenshot in Chromium.
	t.Run("notebook", func(t *testing.T) { testNotebook(t, py, bin) })

	t.Run("example", func(t *testing.T) {
		env := append(os.Environ(), "BATCHFIT_BINARY="+bin, "PYTHONPATH=.", "PYTHONDONTWRITEBYTECODE=1", "XDG_CACHE_HOME="+t.TempDir())
		out := run(t, ".", env, py, "../examples/python_api/search.py")
		if !strings.Contains(out, "(simulated)>\nanswer: ") || !strings.Contains(out, "proof: trial ") {
			t.Errorf("examples/python_api/search.py printed:\n%s", out)
		}
	})
}

// TestMypy type-checks the package with mypy, as pyproject.toml's
// [tool.mypy] says: as Python 3.8 code, every function annotated. It is a
// test rather than a step of scripts/test so that every full run checks it,
// with the interpreter the other tests use.
func TestMypy(t *testing.T) {
	testutil.NeedsFull(t, "Python with mypy")
	py := python(t)
	if exec.Command(py, "-c", "import mypy").Run() != nil {
		t.Skipf("%s has no mypy (scripts/test installs python3-mypy)", py)
	}
	cmd := exec.Command(py, "-m", "mypy", "--cache-dir", t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("python -m mypy: %v\n%s", err, out)
	}
}

// TestWheel installs the host's wheel offline into a fresh venv, where there
// is no Go and no batchfit on PATH, and runs batchfit through it: the command,
// python -m batchfit and the Python API.
func TestWheel(t *testing.T) {
	py := python(t)
	if exec.Command(py, "-c", "import ensurepip, venv").Run() != nil {
		t.Skipf("%s has no venv module with pip (scripts/test installs python3-venv)", py)
	}
	dir := release(t)
	wheels, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
	if len(wheels) != 1 {
		t.Fatalf("want one wheel in %s, got %q", dir, wheels)
	}
	whl := wheels[0]
	version, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	checkWheel(t, whl)

	work := t.TempDir()
	venv := filepath.Join(work, "venv")
	run(t, work, nil, py, "-m", "venv", venv)
	// scripts/wheel without --host puts four platforms' wheels in dist/,
	// beside scripts/release's archives, and pip refuses 'pip install
	// dist/*.whl' for the three that are not this machine's: the index of
	// the folder (--find-links) picks the one, and reads no archive as a
	// source package. The other platforms' wheels stand in as copies named
	// as scripts/wheel names them.
	index := filepath.Join(work, "dist")
	os.Mkdir(index, 0o755)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(index, e.Name()), data, 0o644)
		}
	}
	if archives, _ := filepath.Glob(filepath.Join(index, "*.tar.gz")); len(archives) == 0 {
		t.Fatalf("scripts/wheel --host left no archive in %s", dir)
	}
	wheelVersion := strings.Split(filepath.Base(whl), "-")[1]
	data, err := os.ReadFile(whl)
	if err != nil {
		t.Fatal(err)
	}
	for _, plat := range []string{"manylinux_2_34_aarch64", "macosx_12_0_arm64", "macosx_12_0_x86_64"} {
		if !strings.HasSuffix(whl, "-"+plat+".whl") {
			os.WriteFile(filepath.Join(index, "batchfit-"+wheelVersion+"-py3-none-"+plat+".whl"), data, 0o644)
		}
	}
	run(t, work, nil, filepath.Join(venv, "bin", "pip"), "install", "-q", "--no-index", "--find-links", index, "batchfit")

	// No Go, no batchfit on PATH, nothing of the source tree on sys.path.
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + work, "XDG_CACHE_HOME=" + filepath.Join(work, "cache"), "PYTHONDONTWRITEBYTECODE=1"}
	out := run(t, work, env, filepath.Join(venv, "bin", "batchfit"), "demo")
	if !strings.Contains(out, "largest batch size that runs: ") {
		t.Errorf("batchfit demo printed:\n%s", out)
	}
	if out := run(t, work, env, filepath.Join(venv, "bin", "python"), "-m", "batchfit", "--version"); out != "batchfit version "+string(version) {
		t.Errorf("python -m batchfit --version printed %q, want the release's %q", out, version)
	}
	trainer := filepath.Join(work, "trainer.sh")
	os.WriteFile(trainer, []byte("#!/bin/sh\n[ \"$1\" -gt 100 ] && { echo 'torch.OutOfMemoryError: CUDA out of memory.' >&2; exit 1; }\nexit 0\n"), 0o755)
	snippet := `import sys, batchfit, batchfit.binary
r = batchfit.search([sys.argv[1], "{}"], max=1000, progress=False)
print(r.answer, r.first_failure, r.proof[1].outcome, batchfit.binary.installed() == sys.argv[2], batchfit.__file__.startswith(sys.argv[3]), batchfit.__version__)`
	out = run(t, work, env, filepath.Join(venv, "bin", "python"), "-c", snippet, trainer, filepath.Join(venv, "bin", "batchfit"), venv)
	if out != "100 101 oom True True "+wheelVersion+"\n" {
		t.Errorf("batchfit.search in the venv printed %q", out)
	}

	// pip install --target DIR puts the binary in DIR/bin, where python -m
	// batchfit finds it through the package's RECORD.
	target := filepath.Join(work, "target")
	run(t, work, nil, filepath.Join(venv, "bin", "pip"), "install", "-q", "--no-index", "--no-deps", "--target", target, whl)
	if out := run(t, work, append(env, "PYTHONPATH="+target), py, "-m", "batchfit", "--version"); out != "batchfit version "+string(version) {
		t.Errorf("python -m batchfit --version from --target printed %q", out)
	}
}

// checkWheel checks the wheel's RECORD against its files and the binary's
// mode, which pip keeps.
func checkWheel(t *testing.T, whl string) {
	t.Helper()
	z, err := zip.OpenReader(whl)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string]*zip.File{}
	var record *zip.File
	for _, f := range z.File {
		files[f.Name] = f
		if strings.HasSuffix(f.Name, ".dist-info/RECORD") {
			record = f
		}
	}
	for _, name := range []string{"batchfit/__init__.py", "batchfit/__main__.py", "batchfit/api.py", "batchfit/flags.json", "batchfit/_hook/sitecustomize.py"} {
		if files[name] == nil {
			t.Errorf("the wheel has no %s", name)
		}
	}
	if record == nil {
		t.Fatal("the wheel has no RECORD")
	}
	rc, _ := record.Open()
	defer rc.Close()
	listed := 0
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ",")
		name := fields[0]
		if name == record.Name {
			continue
		}
		listed++
		f := files[name]
		if f == nil {
			t.Errorf("RECORD lists %s, which the wheel lacks", name)
			continue
		}
		r, _ := f.Open()
		h := sha256.New()
		n, _ := io.Copy(h, r)
		r.Close()
		if want := "sha256=" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)); fields[1] != want || fields[2] != strconv.FormatInt(n, 10) {
			t.Errorf("RECORD says %s %s %s, the file has %s %d", name, fields[1], fields[2], want, n)
		}
		if strings.Contains(name, ".data/scripts/") && f.Mode().Perm() != 0o755 {
			t.Errorf("%s has mode %v, want 0755", name, f.Mode())
		}
	}
	if listed != len(files)-1 {
		t.Errorf("RECORD lists %d files, the wheel holds %d besides it", listed, len(files)-1)
	}
}

// run runs a command in dir (with env in place of the environment, when
// given) and returns its stdout; it fails the test on a non-zero exit.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// python returns the interpreter for the tests: BATCHFIT_TEST_PYTHON, else
// Debian's /usr/bin/python3 (whose venv module scripts/test installs), else
// python3 on PATH.
func python(t *testing.T) string {
	t.Helper()
	testutil.NeedsFull(t, "Python, the wheel and a venv")
	for _, p := range []string{os.Getenv("BATCHFIT_TEST_PYTHON"), "/usr/bin/python3"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return p
}
