package testenv

import "github.com/flashsale/flashsale/internal/hashslot"

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the part between the first "{" and the next
// "}", if not empty), modulo 16384.
func Slot(key string) int { return hashslot.Of(key) }
