// Package fulldisk makes a real full disk for tests of what batchfit does
// when its writes fail: a small tmpfs, filled to its last block, where
// files can still be created but no byte can be written to them.
package fulldisk

import "errors"

// Size is the full tmpfs's size, as the issue that asked for these tests
// gave it.
const Size = 256 << 10

// RoomySize is a tmpfs with room for the logs of a few trials, for a test
// whose trial fills it.
const RoomySize = 4 << 20

// ErrNotPermitted is a mount this process may not make (it is not root, a
// container denies mount(2), or the system has no tmpfs); tests then skip
// with the reason.
var ErrNotPermitted = errors.New("mounting a tmpfs is not permitted here")
