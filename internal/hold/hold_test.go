package hold

import (
	"errors"
	"testing"
)

// fakeDevice rounds every block up to its page and charges a page of
// bookkeeping for each, as the driver does, so that free moves by more
// than a block.
type fakeDevice struct {
	total, page uint64
	blocks      map[uint64]uint64
	next        uint64
	failAlloc   bool
}

func (d *fakeDevice) used() uint64 {
	var n uint64
	for _, b := range d.blocks {
		n += b
	}
	return n
}

func (d *fakeDevice) free() (uint64, error) { return d.total - d.used(), nil }

func (d *fakeDevice) alloc(n uint64) (uint64, error) {
	size := (n+d.page-1)/d.page*d.page + d.page
	if d.failAlloc || size > d.total-d.used() {
		return 0, errors.New("out of memory")
	}
	d.next++
	d.blocks[d.next] = size
	return d.next, nil
}

func (d *fakeDevice) release(p uint64) error {
	delete(d.blocks, p)
	return nil
}

func TestFillSettlesAtLeave(t *testing.T) {
	for _, page := range []uint64{2 << 20, 3 << 20, 1 << 20} {
		d := &fakeDevice{total: 140 << 30, page: page, blocks: map[uint64]uint64{}}
		leave := uint64(24<<30) + 123456
		blocks, free, err := fill(d, leave)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if free > leave || free+Granularity < leave {
			t.Errorf("page %d: free %d, want at most %d, within %d", page, free, leave, Granularity)
		}
		if len(blocks) != len(d.blocks) {
			t.Errorf("page %d: %d blocks returned, %d held", page, len(blocks), len(d.blocks))
		}
	}
}

func TestFillShortOfLeave(t *testing.T) {
	d := &fakeDevice{total: 20 << 30, page: 2 << 20, blocks: map[uint64]uint64{}}
	_, _, err := fill(d, 24<<30)
	var se *ShortError
	if !errors.As(err, &se) || se.Free != 20<<30 || se.Want != 24<<30 {
		t.Fatalf("err = %v, want a ShortError of 20 GiB free for 24 GiB", err)
	}
}

func TestFillGivesBackOnError(t *testing.T) {
	d := &fakeDevice{total: 140 << 30, page: 2 << 20, blocks: map[uint64]uint64{}, failAlloc: true}
	if _, _, err := fill(d, 24<<30); err == nil {
		t.Fatal("fill succeeded with every allocation failing")
	}
	if len(d.blocks) != 0 {
		t.Errorf("%d blocks left held after an error", len(d.blocks))
	}
}

func TestUUIDBytes(t *testing.T) {
	b, err := uuidBytes("GPU-0123abcd-4567-89ab-cdef-0123456789ab")
	if err != nil || b[0] != 0x01 || b[15] != 0xab {
		t.Errorf("uuidBytes = %x, %v", b, err)
	}
	for _, bad := range []string{"", "GPU-xyz", "MIG-0123"} {
		if _, err := uuidBytes(bad); err == nil {
			t.Errorf("uuidBytes(%q) succeeded", bad)
		}
	}
}
