package idgen

import (
	"errors"
	"time"
)

// ID layout: bit 63 is always 0, bits 62..32 hold the second (since the
// epoch) in which the ID's range was allocated, bits 31..0 the sequence
// number within that second.
const (
	seqBits = 32
	seqMask = 1<<seqBits - 1
	// MaxSeconds is the last second an ID can hold: with the default epoch,
	// IDs run out in January 2094.
	MaxSeconds = 1<<31 - 1
)

// DefaultEpoch is the epoch IDs count their seconds from unless WithEpoch
// says otherwise.
var DefaultEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	// ErrClosed is returned by NextID after Close.
	ErrClosed = errors.New("idgen: closed")
	// ErrUnavailable is returned, wrapping the cause, when NextID needs a
	// new range and Redis cannot give one.
	ErrUnavailable = errors.New("idgen: unavailable")
	// ErrTimeRange is returned when Redis's clock is before the epoch or
	// past MaxSeconds after it: the 31 bits of seconds would wrap.
	ErrTimeRange = errors.New("idgen: clock outside the id time range")
)

// Decompose splits an ID into the second its range was allocated (by
// Redis's clock) and its sequence number within that second.
func Decompose(id int64, epoch time.Time) (t time.Time, seq uint32) {
	return epoch.Add(time.Duration(id>>seqBits) * time.Second), uint32(id & seqMask)
}

// compose builds the ID of sequence number seq in second ts. A seq of
// 2^32, the end of a range that used up its second, is the first ID of the
// next second: hence +, not |.
func compose(ts, seq int64) int64 {
	return ts<<seqBits + seq
}

// position is a point in (second, sequence) order: the ID space with room
// for a sequence number of 2^32, which means "the second is used up".
type position struct {
	ts, seq int64
}

// after reports whether p comes after q.
func (p position) after(q position) bool {
	return p.ts > q.ts || p.ts == q.ts && p.seq > q.seq
}

// past returns the position just past id.
func past(id int64) position {
	return position{ts: id >> seqBits, seq: id&seqMask + 1}
}
