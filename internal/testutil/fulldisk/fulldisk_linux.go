package fulldisk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of Size at dir, which must exist, and fills it. The
// returned unmount undoes it, and must be called before dir is removed.
func Mount(dir string) (unmount func() error, err error) {
	unmount, err = MountEmpty(dir, Size)
	if err != nil {
		return nil, err
	}
	if err := fill(filepath.Join(dir, ".filler")); err != nil {
		_ = unmount()
		return nil, err
	}
	return unmount, nil
}

// MountEmpty mounts an empty tmpfs of size bytes at dir, which must exist.
// The returned unmount undoes it, and must be called before dir is removed.
func MountEmpty(dir string, size int) (unmount func() error, err error) {
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w: mount %s: %v", ErrNotPermitted, dir, err)
		}
		return nil, fmt.Errorf("mount a tmpfs on %s: %w", dir, err)
	}
	return func() error { return unix.Unmount(dir, unix.MNT_DETACH) }, nil
}

// fill writes to path until the file system refuses, and checks that it
// refuses a new file's first byte too.
func fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	block := make([]byte, 4096)
	for {
		if _, err = f.Write(block); err != nil {
			break
		}
	}
	f.Close()
	if !errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("fill %s: %w", path, err)
	}
	probe := path + ".probe"
	g, err := os.Create(probe)
	if err != nil {
		return err
	}
	defer os.Remove(probe)
	defer g.Close()
	if _, err := io.WriteString(g, "x"); !errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("fill %s: a new file still takes a byte (%v)", path, err)
	}
	return nil
}
