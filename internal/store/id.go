package store

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"time"
)

// idAlphabet is Crockford's base32 in lower case: no i, l, o or u, so an id
// read aloud or retyped is hard to get wrong.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// idLen is the length of every run id: 9 characters of milliseconds since
// 1970 (good until the year 3084) and 3 random ones. Fixed width makes ids
// sort by time as strings; the random tail separates runs begun in the same
// millisecond, and the insert retries on the rare collision.
const idLen = 12

func newID(t time.Time) string {
	var b [idLen]byte
	ms := uint64(t.UnixMilli())
	for i := 8; i >= 0; i-- {
		b[i] = idAlphabet[ms&31]
		ms >>= 5
	}
	var r [8]byte
	rand.Read(r[:]) // never fails (crypto/rand documents it)
	x := binary.LittleEndian.Uint64(r[:])
	for i := 9; i < idLen; i++ {
		b[i] = idAlphabet[x&31]
		x >>= 5
	}
	return string(b[:])
}

// normalizeID lower-cases an id or prefix typed by a user and reports whether
// it could be (the start of) an id at all.
func normalizeID(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > idLen {
		return s, false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(idAlphabet, s[i]) < 0 {
			return s, false
		}
	}
	return s, true
}
