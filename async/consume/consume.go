// Package consume persists the orders the async gate accepted: a Consumer
// reads each registered voucher's stream in a consumer group, writes
// batches to the system of record and acknowledges them only afterwards,
// so each accepted order is persisted once whatever crashes, or moved with
// its reason to the voucher's dead-letter stream; none is dropped. It
// meets the gate (package async) only in Redis (async/internal/layout).
//
// Each consumer keeps a heartbeat in Redis; the entries of one whose
// heartbeat is gone (it died) are taken over by the others within about a
// heartbeat (heartbeat.go). A batch whose voucher the database does not
// have is a configuration error, never a dead letter: it stays pending
// for a consumer of the right database (unknown.go). How: ../DESIGN.md.
//
// When a voucher's sale is over and drained, its keys are retired: the
// consumer schedules it and, RetireAfter later, has the reconciler check
// and delete it (retire.go).
package consume

import (
	"context"
	_ "embed" // the Lua scripts

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// Persister stores batches of accepted orders: what the consumer needs
// from the system of record (*store.DB, passed in by cmd). PersistOrders
// must be idempotent and all-or-nothing, and must return an error wrapping
// flashsale.ErrStockShort when the batch needs more stock than is left, and
// one wrapping flashsale.ErrUnknownVoucher when it has no such voucher.
type Persister interface {
	PersistOrders(ctx context.Context, orders []flashsale.Order) (flashsale.PersistResult, error)
}

// ErrMalformed is wrapped when a stream entry cannot be read as an order.
var ErrMalformed = layout.ErrMalformed

// The consumer's own Lua scripts; ack.lua and backlog.lua, which the gate
// runs too, are in internal/layout.
var (
	//go:embed claim.lua
	claimLua string
	//go:embed dead.lua
	deadLua string
	//go:embed reap.lua
	reapLua string
	//go:embed takeover.lua
	takeoverLua string

	claimScript    = rueidis.NewLuaScript(claimLua)
	deadScript     = rueidis.NewLuaScript(deadLua)
	reapScript     = rueidis.NewLuaScript(reapLua)
	takeoverScript = rueidis.NewLuaScript(takeoverLua)
)
