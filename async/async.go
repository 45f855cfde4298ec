// Package async takes seckill orders the fast way: a Lua script in Redis
// decides, atomically, whether a buyer gets an item, the buyer gets an
// answer at once, and a consumer persists the order to MySQL in the
// background. It closes the two gaps this design usually leaves open
// (memory limits and data safety): what the gate accepted is as durable as
// the chosen durability mode promises, nothing is sold twice, and the queue
// in Redis holds only what is not persisted yet.
//
// The Redis layout the gate shares with the consumer (async/consume) and
// the reconciler (async/reconcile) is in async/internal/layout; the three
// meet only there. How the pipeline works, what it keeps in memory and what
// each durability mode can lose: DESIGN.md beside this file.
package async

import (
	"errors"

	"github.com/flashsale/flashsale/async/internal/layout"
)

// Defaults shared by the Service, the consumer and the reconciler. They
// must agree on the prefix and the group.
const (
	DefaultPrefix = layout.DefaultPrefix
	DefaultGroup  = layout.DefaultGroup
)

// ErrNotLoaded means a voucher's keys are missing from Redis.
var ErrNotLoaded = errors.New("async: voucher not loaded in Redis")
