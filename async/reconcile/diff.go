package reconcile

// The differences reconciliation finds between Redis and MySQL.

// DiffKind names a kind of difference between Redis and MySQL.
type DiffKind string

// The differences Reconciler reports. Only lost_order, dead_letter,
// order_mismatch, unregistered and return_pending are repaired by Repair;
// the others need a person.
const (
	// DiffNotLoaded: the voucher is in MySQL but not in Redis. Not
	// repaired: the service reloads a voucher when it is first ordered,
	// and loading every old voucher would only fill Redis.
	DiffNotLoaded DiffKind = "not_loaded"
	// DiffRedisStock: Redis's stock plus its buyers is not the initial
	// stock (every accepted order takes exactly one unit, every give-back
	// returns one), or the initial stock is not MySQL's. Not repaired: the
	// gate changes the stock all the time, so an absolute write would race
	// it, and which side is wrong needs a person.
	DiffRedisStock DiffKind = "redis_stock"
	// DiffMySQLStock: MySQL's remaining plus its orders is not the stock,
	// or a user has two orders. Not repaired: MySQL is the system of
	// record; its rows are changed by people, not by reconciliation.
	DiffMySQLStock DiffKind = "mysql_stock"
	// DiffLostOrder: Redis accepted the order (the buyer holds it) but it
	// is not in MySQL, not waiting in the stream and not dead-lettered.
	// Repaired by appending it to the stream again; persisting it is
	// idempotent, so a copy that turns up anyway does no harm.
	DiffLostOrder DiffKind = "lost_order"
	// DiffDeadLetter: the order was dead-lettered, the user has no order
	// in MySQL, and the buyer still holds the unit. Repaired by removing
	// the buyer and giving the unit back to Redis's stock (the user may
	// then buy again).
	DiffDeadLetter DiffKind = "dead_letter"
	// DiffOrderMismatch: the user's order in MySQL is not the one Redis
	// recorded for the buyer. Repaired by recording MySQL's order in Redis:
	// the unit is held either way, and lookups then find the real order.
	DiffOrderMismatch DiffKind = "order_mismatch"
	// DiffUnregistered: orders wait in the voucher's stream, but the
	// voucher is not in the registry that consumers start their workers
	// from, so nobody reads them (a re-queue or a retirement cut short
	// between its two steps). Repaired by registering the voucher again.
	DiffUnregistered DiffKind = "unregistered"
	// DiffBacklogCount: the backlog in orders that the gate and the acks
	// keep (the meta hash's queued) is not the orders of the entries the
	// consumer group has not acknowledged: an entry was lost from the
	// stream, an order was re-queued after its entry was acknowledged, or
	// the keys were loaded by a version that counted entries. Repaired by
	// writing the count.
	DiffBacklogCount DiffKind = "backlog_count"
	// DiffUnknownOrder: MySQL has an order whose user is not a buyer in
	// Redis. A consumer records the buyer of every order it persists, so
	// this is left by orders that reached MySQL some other way (written by
	// hand, or by another strategy). Not repaired: making the user a buyer
	// would change the stock accounting that the gate runs on; reload the
	// voucher (delete its Redis keys when no order is in flight) if MySQL
	// is right.
	DiffUnknownOrder DiffKind = "unknown_order"
	// DiffReturnPending: an order was cancelled or expired in MySQL (its
	// units given back there) longer ago than a return takes, but its
	// units are not marked back in the gate's stock: the instance doing it
	// died between the two halves. Repaired by finishing the return, which
	// changes nothing for an order whose units are back already; every
	// instance's expirer finishes such returns too.
	DiffReturnPending DiffKind = "return_pending"
)

// Diff is one difference between Redis and MySQL.
type Diff struct {
	Kind      DiffKind
	VoucherID int64
	UserID    int64 // 0 when the difference is not about a user
	OrderID   int64 // 0 when the difference is not about an order
	Detail    string
	// Fixed is true when a repair was asked for (Repair) and made.
	Fixed bool
}

// Report is what Reconciler found for one voucher.
type Report struct {
	VoucherID int64
	// Loaded is false when the voucher is not in Redis; the Redis figures
	// are zero then.
	Loaded bool
	// Retired is true when the voucher is not in Redis because its sale
	// is over: its keys were retired (or lost after it ended), which is no
	// difference.
	Retired bool
	// From Redis, summed over a sharded voucher's shards (Stock and
	// InitialStock count the units moving between them): stock left and
	// initial stock, buyers recorded and the units they hold, accepted
	// orders not acknowledged by the consumers yet, and dead letters.
	Stock, InitialStock, Buyers, Held, InFlight, DeadLetters int
	// Moved counts the moves between a sharded voucher's shards that Repair
	// completed (their movers had died, or were still at work).
	Moved int
	// From MySQL: remaining stock and live orders (that hold stock).
	Remaining, Orders int
	Diffs             []Diff
}

// add appends a difference about the report's voucher.
func (rep *Report) add(d Diff) *Diff {
	d.VoucherID = rep.VoucherID
	rep.Diffs = append(rep.Diffs, d)
	return &rep.Diffs[len(rep.Diffs)-1]
}
