package lab

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/store"
)

// Evidence is what the audit of one sale looks at. AcceptedIDs,
// TurnedAway, TurnedAwayUnits, Buyers and PaidIDs come from the answers;
// everything else is read from MySQL and Redis after the sale.
type Evidence struct {
	// AcceptedIDs are the order ids the accepted answers named.
	AcceptedIDs []int64
	// TurnedAway are the buyers refused, or left without an answer (a
	// transport error), at least once; TurnedAwayUnits the fewest units
	// each asked for then (absent: 1).
	TurnedAway      []int64
	TurnedAwayUnits map[int64]int
	// DB is the voucher's audit in MySQL: its stock, remaining stock,
	// orders and buyers.
	DB flashsale.Audit
	// OrderIDs and OrderUsers are the ids and buyers of the voucher's
	// orders in MySQL.
	OrderIDs   []int64
	OrderUsers []int64
	// MaxBuyerUnits is the most units one buyer's live orders hold;
	// UserUnits the units each buyer's live orders hold.
	MaxBuyerUnits int
	UserUnits     map[int64]int
	// Closed are the orders among the accepted ones and PaidIDs that
	// MySQL holds but not live: cancelled, expired or failed.
	Closed []flashsale.Order
	// RemainingRedis is the stock Redis holds for the voucher, nil when
	// the voucher's stock is not kept in Redis.
	RemainingRedis *int
	// For a sale with a payment window: what the buyers did (nil for a
	// sale without one), the orders they were told were paid, and the
	// units of the paid orders in MySQL.
	Buyers    *Lifecycle
	PaidIDs   []int64
	PaidUnits int
}

// Findings is the audit's verdict on one sale. A sale that took orders
// correctly has Oversold, DuplicateBuyers, Lost, Undersold and StockDrift
// all zero, and its Lifecycle (if any) no problem.
type Findings struct {
	// Orders counts the live orders, Units the units they hold, and
	// MaxBuyerUnits the most of them one buyer holds.
	Orders          int
	Units           int
	MaxBuyerUnits   int
	DistinctBuyers  int
	DuplicateBuyers int
	RemainingDB     int
	RemainingRedis  *int
	// Oversold counts the units sold beyond the stock.
	Oversold int
	// Lost counts the accepted orders that are not in MySQL, neither live
	// nor cancelled or expired.
	Lost int
	// Undersold counts the stock left while buyers who hold no order were
	// turned away asking for no more than was left: min(units left, the
	// units those buyers asked for), the sales a correct strategy would
	// have made. A unit counts as left only if MySQL's remaining stock,
	// the stock less the units sold and lost orders, and Redis's stock
	// (where it keeps one) all say so, so that a unit already counted as
	// oversold, lost or drifted is not counted again.
	Undersold int
	// StockDrift is stock − remaining − units sold. Negative: units the
	// stock does not account for (lost updates: two buyers wrote the same
	// new stock); positive: stock taken without an order.
	StockDrift int
	// Lifecycle is what became of the orders of a sale with a payment
	// window; nil without one.
	Lifecycle *Lifecycle
}

// Exact reports whether the sale shows no oversell, buyer past the limit,
// lost order, undersold stock, drift or lifecycle problem.
func (f Findings) Exact() bool {
	return f.Oversold == 0 && f.DuplicateBuyers == 0 && f.Lost == 0 && f.Undersold == 0 && f.StockDrift == 0 &&
		(f.Lifecycle == nil || len(f.Lifecycle.problems(f.Units)) == 0)
}

// Check audits one sale's evidence.
func Check(e Evidence) Findings {
	f := Findings{
		Orders:          e.DB.Orders,
		Units:           e.DB.Units,
		MaxBuyerUnits:   e.MaxBuyerUnits,
		DistinctBuyers:  e.DB.DistinctBuyers,
		DuplicateBuyers: e.DB.DuplicateBuyers,
		RemainingDB:     e.DB.Remaining,
		RemainingRedis:  e.RemainingRedis,
		Oversold:        max(0, e.DB.Units-e.DB.Stock),
		StockDrift:      e.DB.Stock - e.DB.Remaining - e.DB.Units,
	}
	stored := set(e.OrderIDs)
	for _, o := range e.Closed {
		if o.Status == flashsale.StatusCancelled || o.Status == flashsale.StatusExpired {
			stored[o.ID] = true // its buyer, or its payment window, ended it
		}
	}
	for _, id := range e.AcceptedIDs {
		if !stored[id] {
			f.Lost++
		}
	}
	left := min(e.DB.Remaining, e.DB.Stock-e.DB.Units-f.Lost)
	if e.RemainingRedis != nil {
		left = min(left, *e.RemainingRedis)
	}
	holders := set(e.OrderUsers)
	unserved := 0 // the units a correct strategy would have sold them
	for _, u := range e.TurnedAway {
		if q := max(e.TurnedAwayUnits[u], 1); !holders[u] && q <= left {
			unserved += q
		}
	}
	f.Undersold = min(max(0, left), unserved)
	if e.Buyers != nil {
		f.Lifecycle = checkLifecycle(e)
	}
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
	st, err := async.AuditState(ctx, a.redis, a.prefix, voucherID)
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
// accepted for the voucher: MySQL holds the units of every order Redis
// recorded except the dead-lettered ones. It gives up after timeout with
// ErrNotDrained. A voucher that is not in Redis has nothing to drain.
func (a *Auditor) Drain(ctx context.Context, voucherID int64, timeout time.Duration) error {
	return a.await(ctx, voucherID, timeout, false)
}

// Settle waits until every order of the voucher is settled: drained (see
// Drain), none awaiting payment and no return pending. It gives up after
// timeout with ErrNotDrained.
func (a *Auditor) Settle(ctx context.Context, voucherID int64, timeout time.Duration) error {
	return a.await(ctx, voucherID, timeout, true)
}

// await is Drain, and with settle Settle.
func (a *Auditor) await(ctx context.Context, voucherID int64, timeout time.Duration, settle bool) error {
	deadline := time.Now().Add(timeout)
	for {
		rs, err := a.readRedis(ctx, voucherID)
		if err != nil || !rs.Loaded && !settle {
			return err
		}
		audit, err := a.db.AuditVoucher(ctx, voucherID)
		if err != nil {
			return err
		}
		// More in MySQL than Redis expects is for the audit to report.
		drained := !rs.Loaded || audit.Units >= rs.Held-rs.DeadLetters
		if drained && (!settle || audit.AwaitingPayment == 0 && audit.ReturnsPending == 0) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s: voucher %d has %d units held in Redis, %d dead letters, %d units in MySQL; %d orders await payment, %d returns pending",
				ErrNotDrained, timeout, voucherID, rs.Held, rs.DeadLetters, audit.Units, audit.AwaitingPayment, audit.ReturnsPending)
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
	return a.collect(ctx, voucherID, res, nil)
}

// collect is Collect, which also reads what became of the orders paid
// names (those the buyers were told were paid) when they are not live.
func (a *Auditor) collect(ctx context.Context, voucherID int64, res *Result, paid []int64) (Evidence, error) {
	e := Evidence{AcceptedIDs: slices.Clone(res.OrderIDs), TurnedAway: slices.Clone(res.TurnedAway),
		TurnedAwayUnits: maps.Clone(res.TurnedAwayUnits), PaidIDs: slices.Clone(paid)}
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
	_, orders, err := a.db.VoucherSnapshot(ctx, voucherID)
	if err != nil {
		return e, err
	}
	live := e.readLive(orders)
	for _, id := range slices.Concat(e.AcceptedIDs, paid) {
		if live[id] {
			continue
		}
		live[id] = true // looked up once
		o, err := a.db.FindOrder(ctx, id)
		if flashsale.ErrorCode(err) == flashsale.ENotFound {
			continue // lost, if it was accepted
		}
		if err != nil {
			return e, fmt.Errorf("lab: %w", err)
		}
		e.Closed = append(e.Closed, *o)
	}
	return e, nil
}

// readLive fills e's figures of the live orders among orders and returns
// their ids.
func (e *Evidence) readLive(orders []flashsale.Order) map[int64]bool {
	units := map[int64]int{}
	live := map[int64]bool{}
	for _, o := range orders {
		if !o.Status.Live() {
			continue // a closed order whose return is pending
		}
		e.OrderIDs = append(e.OrderIDs, o.ID)
		units[o.UserID] += o.Units()
		live[o.ID] = true
		if o.Status == flashsale.StatusPaid {
			e.PaidUnits += o.Units()
		}
	}
	slices.Sort(e.OrderIDs)
	e.OrderUsers = slices.Sorted(maps.Keys(units))
	e.UserUnits = units
	for _, n := range units {
		e.MaxBuyerUnits = max(e.MaxBuyerUnits, n)
	}
	return live
}
