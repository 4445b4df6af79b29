//go:build !linux

package fulldisk

// Mount is a Linux tmpfs; elsewhere there is none to mount.
func Mount(dir string) (unmount func() error, err error) { return nil, ErrNotPermitted }

// MountEmpty is a Linux tmpfs; elsewhere there is none to mount.
func MountEmpty(dir string, size int) (unmount func() error, err error) {
	return nil, ErrNotPermitted
}
