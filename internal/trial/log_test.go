package trial

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		from int64
		n    int
		want string
		null bool
	}{
		{"last bytes", path, 0, 4, "6789", false},
		{"more than the file", path, 0, 100, "0123456789", false},
		{"not before from", path, 8, 4, "89", false},
		{"from before the tail", path, 2, 4, "6789", false},
		{"from at the end", path, 10, 4, "", false},
		{"from past the end", path, 20, 4, "", false},
		{"no file", filepath.Join(t.TempDir(), "missing"), 0, 4, "", true},
		{"no path", "", 0, 4, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReadTail(tt.path, tt.from, tt.n)
			if string(got) != tt.want || (got == nil) != tt.null {
				t.Errorf("ReadTail(%q, %d, %d) = %q (nil %v), want %q (nil %v)",
					tt.path, tt.from, tt.n, got, got == nil, tt.want, tt.null)
			}
		})
	}
}

func TestOpenLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	if err := os.WriteFile(path, []byte("an earlier run"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, temp, err := OpenLog(path, "batchfit-test-*")
	if err != nil {
		t.Fatalf("OpenLog(%q): %v", path, err)
	}
	f.Close()
	if temp {
		t.Error("OpenLog with a path says the file is temporary")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("log at %q not truncated: %v, %v", path, fi, err)
	}

	f, temp, err = OpenLog("", "batchfit-test-*")
	if err != nil {
		t.Fatalf("OpenLog without a path: %v", err)
	}
	f.Close()
	defer os.Remove(f.Name())
	if !temp {
		t.Error("OpenLog without a path does not say the file is temporary")
	}
	if m, _ := filepath.Match("batchfit-test-*", filepath.Base(f.Name())); !m {
		t.Errorf("temporary log %q not named after its pattern", f.Name())
	}
}
