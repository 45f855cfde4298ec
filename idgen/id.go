package idgen

import (
	"errors"
	"time"
)

// ID layouts. Bit 63 is always 0. A plain ID (New without WithSlot) has
// bit 62 clear: bits 62..32 hold the second (since the epoch) in which the
// ID's range was allocated, bits 31..0 the sequence number within that
// second. A slotted ID (WithSlot, Slots) has bit 62 set: bits 61..31 hold
// the second, bits 30..14 the sequence number, bits 13..0 the Redis
// Cluster slot it was allocated for. Bit 62 keeps the two apart: they
// never collide, and every slotted ID is above every plain one.
const (
	seqBits = 32
	seqMask = 1<<seqBits - 1

	slottedFlag    = 1 << 62
	slotBits       = 14
	slotMask       = 1<<slotBits - 1
	slottedSeqBits = 17
	slottedSeqMask = 1<<slottedSeqBits - 1
	// slottedShift is where a slotted ID's second starts.
	slottedShift = slotBits + slottedSeqBits
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

// Decompose splits a plain ID (New's) into the second its range was
// allocated (by Redis's clock) and its sequence number within that second.
func Decompose(id int64, epoch time.Time) (t time.Time, seq uint32) {
	return epoch.Add(time.Duration(id>>seqBits) * time.Second), uint32(id & seqMask)
}

// DecomposeSlotted splits a slotted ID (WithSlot's, Slots') into its
// second, its sequence number within the second and its slot.
func DecomposeSlotted(id int64, epoch time.Time) (t time.Time, seq uint32, slot int) {
	return epoch.Add(time.Duration(Second(id)) * time.Second), uint32(id >> slotBits & slottedSeqMask), int(id & slotMask)
}

// Second returns the second (since the epoch) of an ID, by its layout:
// slotted if bit 62 is set. A plain ID has bit 62 set only from its second
// 2^30 on (2060 with the default epoch): a system that mixes the layouts
// must stop handing out plain IDs by then.
func Second(id int64) int64 {
	if id&slottedFlag != 0 {
		return id >> slottedShift & MaxSeconds
	}
	return id >> seqBits
}

// Slot returns the Redis Cluster slot a slotted ID carries, and false for
// a plain ID (before 2060: see Second) or one that is not positive.
func Slot(id int64) (int, bool) {
	if id <= 0 || id&slottedFlag == 0 {
		return 0, false
	}
	return int(id & slotMask), true
}

// composeSlotted builds the slotted ID of sequence number seq in second
// ts for slot. A seq of 2^17 is the first ID of the next second, as in
// compose.
func composeSlotted(ts, seq int64, slot int) int64 {
	return slottedFlag | (ts<<slottedSeqBits+seq)<<slotBits | int64(slot)
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

// compose builds the ID of sequence number seq in second ts in g's layout.
func (g *Generator) compose(ts, seq int64) int64 {
	if g.slotted {
		return composeSlotted(ts, seq, g.slot)
	}
	return compose(ts, seq)
}

// span returns the range of count IDs from sequence number start in
// second ts, in g's layout.
func (g *Generator) span(ts, start, count int64) span {
	s := span{lo: g.compose(ts, start), hi: g.compose(ts, start+count)}
	if g.slotted {
		s.shift = slotBits
	}
	return s
}

// past returns the position just past id in g's sequence space: past the
// whole of id's second when id is of another layout or slot, whose
// sequence numbers say nothing of g's.
func (g *Generator) past(id int64) position {
	slot, slotted := Slot(id)
	switch {
	case !g.slotted && !slotted:
		return past(id)
	case g.slotted && slotted && slot == g.slot:
		return position{ts: Second(id), seq: id>>slotBits&slottedSeqMask + 1}
	}
	return position{ts: Second(id), seq: g.seqMax}
}
