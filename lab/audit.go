package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/store"
)

// Evidence is what the audit of one sale looks at. Only AcceptedIDs and
// TurnedAway come from the answers; everything else is read from MySQL and
// Redis after the sale.
type Evidence struct {
	// AcceptedIDs are the order ids the accepted answers named.
	AcceptedIDs []int64
	// TurnedAway are the buyers refused, or left without an answer (a
	// transport error), at least once.
	TurnedAway []int64
	// DB is the voucher's audit in MySQL: its stock, remaining stock,
	// orders and buyers.
	DB flashsale.Audit
	// OrderIDs and OrderUsers are the ids and buyers of the voucher's
	// orders in MySQL.
	OrderIDs   []int64
	OrderUsers []int64
	// RemainingRedis is the stock Redis holds for the voucher, nil when
	// the voucher's stock is not kept in Redis.
	RemainingRedis *int
}

// Findings is the audit's verdict on one sale. A sale that took orders
// correctly has Oversold, DuplicateBuyers, Lost, Undersold and StockDrift
// all zero.
type Findings struct {
	Orders          int
	DistinctBuyers  int
	DuplicateBuyers int
	RemainingDB     int
	RemainingRedis  *int
	// Oversold counts the orders beyond the stock.
	Oversold int
	// Lost counts the accepted orders that are not in MySQL.
	Lost int
	// Undersold counts the stock left while buyers who hold no order were
	// turned away: min(units left, such buyers), the sales a correct
	// strategy would have made. A unit counts as left only if MySQL's
	// remaining stock, the stock less the orders and lost orders, and
	// Redis's stock (where it keeps one) all say so, so that a unit
	// already counted as oversold, lost or drifted is not counted again.
	Undersold int
	// StockDrift is stock − remaining − orders. Negative: orders the stock
	// does not account for (lost updates: two buyers wrote the same new
	// stock); positive: stock taken without an order.
	StockDrift int
}

// Exact reports whether the sale shows no oversell, duplicate, lost order,
// undersold stock or drift.
func (f Findings) Exact() bool {
	return f.Oversold == 0 && f.DuplicateBuyers == 0 && f.Lost == 0 && f.Undersold == 0 && f.StockDrift == 0
}

// Check audits one sale's evidence.
func Check(e Evidence) Findings {
	f := Findings{
		Orders:          e.DB.Orders,
		DistinctBuyers:  e.DB.DistinctBuyers,
		DuplicateBuyers: e.DB.DuplicateBuyers,
		RemainingDB:     e.DB.Remaining,
		RemainingRedis:  e.RemainingRedis,
		Oversold:        max(0, e.DB.Units-e.DB.Stock),
		StockDrift:      e.DB.Stock - e.DB.Remaining - e.DB.Units,
	}
	stored := set(e.OrderIDs)
	for _, id := range e.AcceptedIDs {
		if !stored[id] {
			f.Lost++
		}
	}
	holders := set(e.OrderUsers)
	unserved := 0
	for _, u := range e.TurnedAway {
		if !holders[u] {
			unserved++
		}
	}
	left := min(e.DB.Remaining, e.DB.Stock-e.DB.Units-f.Lost)
	if e.RemainingRedis != nil {
		left = min(left, *e.RemainingRedis)
	}
	f.Undersold = min(max(0, left), unserved)
	return f
}

func set(ids []int64) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// Auditor reads a sale's evidence from MySQL and Redis.
type Auditor struct {
	db     *store.DB
	redis  rueidis.Client
	prefix string
}

// NewAuditor returns an Auditor of the database and Redis the servers use,
// whose keys start with prefix (flashsale serve's --redis-prefix).
func NewAuditor(db *store.DB, redis rueidis.Client, prefix string) *Auditor {
	return &Auditor{db: db, redis: redis, prefix: prefix}
}

// readRedis reads what Redis holds for an async voucher; not loaded for a synchronous strategy's voucher,
// whose stock is not kept in Redis.
func (a *Auditor) readRedis(ctx context.Context, voucherID int64) (async.State, error) {
	st, err := async.ReadState(ctx, a.redis, a.prefix, voucherID)
	if err != nil {
		return st, fmt.Errorf("lab: %w", err)
	}
	return st, nil
}

// Consumers returns the names of the consumers that read the voucher's
// orders (its consumer group, over its shards); none for a voucher not in
// Redis.
func (a *Auditor) Consumers(ctx context.Context, voucherID int64) ([]string, error) {
	names, err := async.Consumers(ctx, a.redis, a.prefix, "", voucherID)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	return names, nil
}

// Drain waits until the async pipeline has persisted every order Redis
// accepted for the voucher: MySQL holds an order for every buyer Redis
// recorded except the dead-lettered ones. It gives up after timeout with
// ErrNotDrained. A voucher that is not in Redis has nothing to drain.
func (a *Auditor) Drain(ctx context.Context, voucherID int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		rs, err := a.readRedis(ctx, voucherID)
		if err != nil || !rs.Loaded {
			return err
		}
		audit, err := a.db.AuditVoucher(ctx, voucherID)
		if err != nil {
			return err
		}
		if audit.Units >= rs.Held-rs.DeadLetters {
			return nil // more than that is for the audit to report
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s: voucher %d has %d buyers in Redis, %d dead letters, %d orders in MySQL",
				ErrNotDrained, timeout, voucherID, rs.Held, rs.DeadLetters, audit.Units)
		}
		if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
			return err
		}
	}
}

// Collect reads the evidence of a sale of the voucher whose answers are
// res. Redis is read first: an async order persisted meanwhile is then in
// MySQL when MySQL is read.
func (a *Auditor) Collect(ctx context.Context, voucherID int64, res *Result) (Evidence, error) {
	e := Evidence{AcceptedIDs: slices.Clone(res.OrderIDs), TurnedAway: slices.Clone(res.TurnedAway)}
	rs, err := a.readRedis(ctx, voucherID)
	if err != nil {
		return e, err
	}
	if rs.Loaded {
		e.RemainingRedis = &rs.Stock
	}
	if e.DB, err = a.db.AuditVoucher(ctx, voucherID); err != nil {
		return e, err
	}
	if e.OrderIDs, err = a.db.OrderIDs(ctx, voucherID); err != nil {
		return e, err
	}
	if e.OrderUsers, err = a.db.OrderUsers(ctx, voucherID); err != nil {
		return e, err
	}
	return e, nil
}
