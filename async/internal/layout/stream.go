package layout

import (
	"strconv"
	"strings"
)

// The fields of stream entries and hashes, as the Lua scripts write them
// (gate.lua and requeue.lua the orders stream, dead.lua the dead-letter
// stream, the gate the epochs stream). They are on the wire: renaming one
// would make old entries unreadable.
const (
	// The orders stream; dead letters copy them.
	FieldOrder    = "o" // order id
	FieldUser     = "u" // user id
	FieldQuantity = "q" // units; absent: 1
	FieldPayBy    = "p" // when the order expires unpaid, µs since 1970; absent: no payment step
	FieldKey      = "k" // the idempotency key it was placed with; absent: none
	// Dead letters (and "entry", "deliveries", which only people read).
	FieldReason = "reason" // why, for a person
	FieldKind   = "kind"   // why, for a program: a DeadKind
	// The meta hash's stock left (the other fields are the scripts' own).
	FieldStock = "stock"
)

// The fields of an entry of the epochs stream: one loss of Redis's data a
// service noticed.
const (
	FieldLossKind  = "kind"        // "emptied" or "rewound"
	FieldNoticed   = "noticed"     // ms since 1970
	FieldPrevious  = "previous"    // the epoch before
	FieldEpoch     = "epoch"       // the epoch after
	FieldNode      = "node"        // the Redis Cluster master that lost its data, or ""
	FieldBy        = "by"          // InstanceName of the service that noticed
	FieldMayBeLost = "may_be_lost" // an upper bound of the orders lost
	FieldAtLeast   = "at_least"    // a lower bound, for a rewind
	FieldVouchers  = "vouchers"    // "voucher:bound", comma-separated
	FieldShard     = "shard"       // the shard a rewind was seen on
)

// DeadKind says, machine-readably, why an order was dead-lettered: the
// dead-letter stream's FieldKind. Entries written before the field existed
// have only the reason.
type DeadKind string

// The kinds of dead letters.
const (
	// DeadStockShort: MySQL had no stock left for the order, so Redis sold
	// one unit too many; reconciliation does not give it back.
	DeadStockShort DeadKind = "stock_short"
	// DeadConflict: the user has another order for the voucher in MySQL.
	DeadConflict DeadKind = "conflict"
	// DeadKeyConflict: another order of the user holds the order's
	// idempotency key in MySQL (or another unique key of the orders): the
	// key's order was placed twice, and this one never will be stored.
	DeadKeyConflict DeadKind = "key_conflict"
	// DeadMalformed: the stream entry is not an order.
	DeadMalformed DeadKind = "malformed"
	// DeadPoison: attempts to persist the order on its own kept dying.
	DeadPoison DeadKind = "poison"
)

// BuyerValue returns a buyer's record in the buyers hash: the units the
// buyer's live orders hold and the latest of them.
func BuyerValue(units int64, latest string) string {
	return strconv.FormatInt(units, 10) + ":" + latest
}

// ParseBuyer reads a buyer's record; an order id alone (what gate.lua
// writes for a new buyer under a limit of 1: one HSETNX, no string built)
// is one unit.
func ParseBuyer(v string) (units int64, latest string) {
	u, order, ok := strings.Cut(v, ":")
	if !ok {
		return 1, v
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil {
		return 1, order
	}
	return n, order
}

// ParseMember reads a registry member, "<id>" or "<id>.<n>": the voucher,
// and the tag body of its (shard's) keys. ok is false for a malformed one.
func ParseMember(m string) (voucherID int64, body string, ok bool) {
	id, _, _ := strings.Cut(m, ".")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, m, true
}
