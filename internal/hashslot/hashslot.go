// Package hashslot computes Redis Cluster hash slots, which rueidis
// computes internally but does not export: the async gate picks its
// shards' hash tags by slot, and the tests find the node that owns a key.
package hashslot

import (
	"strconv"
	"strings"
	"sync"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Of returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the part between the first "{" and the next
// "}", if not empty), modulo Slots.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key)
}

// crc16 returns the slot of a key that has no hash tag.
func crc16(key string) int {
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % Slots)
}

// tags[s] is a short hash tag whose slot is s: built once, on first use.
var (
	tagsOnce sync.Once
	tags     [Slots]string
)

// Tag returns a hash tag, "p<n>" for the smallest such n, whose slot is
// slot (0 ≤ slot < Slots): a key holding "{" + Tag(s) + "}" lives in slot
// s. The first use builds the table (about 150,000 CRC16s, milliseconds).
func Tag(slot int) string {
	tagsOnce.Do(func() {
		for n, left := 0, Slots; left > 0; n++ {
			t := "p" + strconv.Itoa(n)
			if s := crc16(t); tags[s] == "" {
				tags[s] = t
				left--
			}
		}
	})
	return tags[slot]
}
