package adapter

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIsPython(t *testing.T) {
	bin := t.TempDir()
	script := func(name, content string) string {
		p := filepath.Join(bin, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	script("torchrun", "#!/opt/venv/bin/python3\n# -*- coding: utf-8 -*-\nimport re\n")
	script("accelerate", "#!/usr/bin/env python\nimport sys\n")
	script("deepspeed", "#!/bin/sh\n'''exec' \"/a/very/long/path/venv/bin/python3.12\" \"$0\" \"$@\"\n' '''\nimport sys\n")
	script("train.sh", "#!/bin/bash\nexec python train.py \"$@\"\n")
	script("shexec", "#!/bin/sh\n'''exec' /usr/bin/node \"$0\"\n")
	script("binary", "\x7fELF\x02\x01\x01\x00")
	script("empty", "")
	t.Setenv("PATH", bin)

	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"python", "train.py"}, true},
		{[]string{"python3"}, true},
		{[]string{"/usr/bin/python3.12", "-m", "x"}, true},
		{[]string{"python3.13t"}, true},
		{[]string{"python3.12d"}, true},
		{[]string{"/opt/pypy/bin/pypy3.10"}, true},
		{[]string{"pypy"}, true},
		{[]string{"torchrun", "--nproc-per-node", "8", "train.py"}, true},
		{[]string{filepath.Join(bin, "accelerate"), "launch", "t.py"}, true},
		{[]string{"deepspeed", "t.py"}, true},
		{[]string{"env", "-u", "FOO", "A=1", "python3", "t.py"}, true},
		{[]string{"env", "A=1", "--", "torchrun", "t.py"}, true},
		{[]string{"env", "A=1", "bash", "x"}, false},
		{[]string{"uv", "run", "--with", "torch", "python", "t.py"}, true},
		{[]string{"uv", "run", "train.py"}, true},
		{[]string{"conda", "run", "-n", "ml", "torchrun", "t.py"}, true},
		{[]string{"conda", "run", "-n", "ml", "bash", "t.sh"}, false},
		{[]string{"uv", "pip", "install", "python"}, false},
		{[]string{"train.sh"}, false},
		{[]string{"shexec"}, false},
		{[]string{"binary"}, false},
		{[]string{"empty"}, false},
		{[]string{"missing-command"}, false},
		{[]string{"pythonista"}, false},
		{[]string{"bash", "-c", "python t.py"}, false},
		{[]string{""}, false},
		{nil, false},
	} {
		if got := IsPython(tc.argv); got != tc.want {
			t.Errorf("IsPython(%q) = %v, want %v", tc.argv, got, tc.want)
		}
	}
}
