package async

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/flashsale/flashsale/store"
	"github.com/redis/rueidis"
)

// DiffKind names a kind of difference between Redis and MySQL.
type DiffKind string

// The differences Reconciler reports. Only lost_order, dead_letter,
// order_mismatch and unregistered are repaired with fix; the others need
// a person.
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
	// DiffUnknownOrder: MySQL has an order whose user is not a buyer in
	// Redis. A consumer records the buyer of every order it persists, so
	// this is left by orders that reached MySQL some other way (written by
	// hand, or by another strategy). Not repaired: making the user a buyer
	// would change the stock accounting that the gate runs on; reload the
	// voucher (delete its Redis keys when no order is in flight) if MySQL
	// is right.
	DiffUnknownOrder DiffKind = "unknown_order"
)

// Diff is one difference between Redis and MySQL.
type Diff struct {
	Kind      DiffKind
	VoucherID int64
	UserID    int64 // 0 when the difference is not about a user
	OrderID   int64 // 0 when the difference is not about an order
	Detail    string
	// Fixed is true when fix was asked for and the repair was made.
	Fixed bool
}

// Report is what Reconciler found for one voucher.
type Report struct {
	VoucherID int64
	// Loaded is false when the voucher is not in Redis; the Redis figures
	// are zero then.
	Loaded bool
	// From Redis: stock left and initial stock, buyers accepted, accepted
	// orders not acknowledged by the consumers yet, and dead letters.
	Stock, InitialStock, Buyers, InFlight, DeadLetters int
	// From MySQL: remaining stock and orders that hold stock.
	Remaining, Orders int
	Diffs             []Diff
}

// ReconcilerConfig configures a Reconciler; Prefix and Group must be the
// Service's.
type ReconcilerConfig struct {
	Prefix string
	Group  string
	Logger *slog.Logger
}

// Reconciler compares, per voucher, what Redis accepted (buyers, stock,
// orders waiting in the stream, dead letters) with what MySQL holds
// (orders, remaining stock), reports every difference as a Diff, and with
// fix repairs the ones that are safe: it re-queues lost orders, registers
// a voucher whose waiting orders no consumer would read, gives back
// the stock of dead-lettered ones (except those dead-lettered because
// MySQL had no stock left for them), and points a buyer at the order MySQL
// holds. Every repair is a script that checks the buyer still records the
// order it is about, so running it twice, or beside the live pipeline,
// does no harm.
//
// It never touches: MySQL (the system of record; changing orders or stock
// there is a business decision), Redis's stock counter by an absolute
// value (it would race the gate; only the +1 of a give-back is written),
// the streams' pending entries (the consumers own them), or vouchers not
// loaded in Redis.
//
// It reads Redis before MySQL, so an order moving through the pipeline
// meanwhile is never reported lost. It reads whole buyer hashes and order
// lists into memory: fine for a voucher's stock of up to a few million.
type Reconciler struct {
	client rueidis.Client
	db     *store.DB
	keys   keyspace
	group  string
	log    *slog.Logger
}

// NewReconciler returns a Reconciler.
func NewReconciler(client rueidis.Client, db *store.DB, cfg ReconcilerConfig) *Reconciler {
	return &Reconciler{
		client: client,
		db:     db,
		keys:   keyspace{orDefault(cfg.Prefix, DefaultPrefix)},
		group:  orDefault(cfg.Group, DefaultGroup),
		log:    orDefault(cfg.Logger, slog.Default()),
	}
}

// All reconciles every voucher in MySQL.
func (r *Reconciler) All(ctx context.Context, fix bool) ([]*Report, error) {
	vs, err := r.db.ListVouchers(ctx)
	if err != nil {
		return nil, err
	}
	reports := make([]*Report, 0, len(vs))
	for _, v := range vs {
		rep, err := r.Voucher(ctx, v.ID, fix)
		if err != nil {
			return reports, err
		}
		reports = append(reports, rep)
	}
	return reports, nil
}

// redisSide is what Redis holds for a voucher.
type redisSide struct {
	buyers   map[int64]int64 // user → order
	inFlight map[int64]bool  // orders not acknowledged
	dead     []deadLetter
}

// deadLetter is an entry of a dead-letter stream.
type deadLetter struct {
	order, user int64
	reason      string
}

// Voucher reconciles one voucher and, with fix, repairs what is safe. It
// returns ENotFound when the voucher is not in MySQL.
func (r *Reconciler) Voucher(ctx context.Context, id int64, fix bool) (*Report, error) {
	vk := r.keys.voucher(id)
	snap, err := snapshotScript.Exec(ctx, r.client, []string{vk.meta, vk.buyers}, nil).AsIntSlice()
	if err != nil {
		return nil, fmt.Errorf("async: reconcile voucher %d: %w", id, err)
	}
	rep := &Report{VoucherID: id, Loaded: len(snap) == 3}
	var rs redisSide
	if rep.Loaded {
		rep.Stock, rep.InitialStock = int(snap[0]), int(snap[1])
		if rs, err = r.readRedis(ctx, vk); err != nil {
			return nil, fmt.Errorf("async: reconcile voucher %d: %w", id, err)
		}
		rep.Buyers, rep.DeadLetters = len(rs.buyers), len(rs.dead)
	}
	// MySQL last: whatever left the stream before is in MySQL by now.
	audit, err := r.db.AuditVoucher(ctx, id)
	if err != nil {
		return nil, err
	}
	orders, err := r.db.VoucherOrders(ctx, id)
	if err != nil {
		return nil, err
	}
	rep.Remaining, rep.Orders = audit.Remaining, audit.Orders
	if audit.Remaining+audit.Orders != audit.Stock || audit.DuplicateBuyers > 0 {
		rep.add(Diff{Kind: DiffMySQLStock, Detail: fmt.Sprintf("MySQL: stock %d, remaining %d, orders %d, users with two orders %d",
			audit.Stock, audit.Remaining, audit.Orders, audit.DuplicateBuyers)})
	}
	if !rep.Loaded {
		rep.add(Diff{Kind: DiffNotLoaded, Detail: "the voucher is not in Redis"})
		return rep, nil
	}
	if int(snap[0]+snap[2]) != rep.InitialStock || rep.InitialStock != audit.Stock {
		rep.add(Diff{Kind: DiffRedisStock, Detail: fmt.Sprintf("Redis: stock %d + buyers %d, initial stock %d; MySQL stock %d",
			snap[0], snap[2], rep.InitialStock, audit.Stock)})
	}
	mysql := make(map[int64]int64, len(orders)) // user → order
	for _, o := range orders {
		mysql[o.UserID] = o.ID
	}
	if err := r.compare(ctx, vk, rep, rs, mysql, fix); err != nil {
		return rep, err
	}
	if err := r.checkRegistered(ctx, vk, rep, len(rs.inFlight), fix); err != nil {
		return rep, err
	}
	for _, d := range rep.Diffs {
		r.log.Warn("async: reconcile: difference", "voucher", id, "kind", d.Kind, "user", d.UserID, "order", d.OrderID, "detail", d.Detail, "fixed", d.Fixed)
	}
	return rep, nil
}

// add appends a difference about the report's voucher.
func (rep *Report) add(d Diff) *Diff {
	d.VoucherID = rep.VoucherID
	rep.Diffs = append(rep.Diffs, d)
	return &rep.Diffs[len(rep.Diffs)-1]
}

// compare reports the differences between the buyers and the orders, and
// repairs them with fix.
func (r *Reconciler) compare(ctx context.Context, vk voucherKeys, rep *Report, rs redisSide, mysql map[int64]int64, fix bool) error {
	dead := map[int64]bool{}
	for _, d := range rs.dead {
		dead[d.order] = true
	}
	for user, order := range rs.buyers {
		stored, ok := mysql[user]
		switch {
		case ok && stored == order:
		case ok:
			d := rep.add(Diff{Kind: DiffOrderMismatch, UserID: user, OrderID: order,
				Detail: fmt.Sprintf("Redis records order %d, MySQL holds order %d", order, stored)})
			if fix {
				n, err := repointScript.Exec(ctx, r.client, []string{vk.buyers}, []string{itoa(user), itoa(order), itoa(stored)}).AsInt64()
				if err != nil {
					return err
				}
				d.Fixed = n == 1
			}
		case rs.inFlight[order]:
			rep.InFlight++
		case dead[order]:
			// Reported below, from the dead letter.
		default:
			d := rep.add(Diff{Kind: DiffLostOrder, UserID: user, OrderID: order,
				Detail: "accepted by Redis; not in MySQL, the stream or the dead letters"})
			if fix {
				fixed, err := r.requeue(ctx, vk, rep.VoucherID, user, order)
				if err != nil {
					return err
				}
				d.Fixed = fixed
			}
		}
	}
	seen := map[int64]bool{}
	for _, dl := range rs.dead {
		if seen[dl.order] || dl.order == 0 || dl.user == 0 {
			continue // a copy, or a malformed entry with nothing to give back
		}
		seen[dl.order] = true
		if _, ok := mysql[dl.user]; ok || rs.buyers[dl.user] != dl.order || rs.inFlight[dl.order] {
			continue // persisted after all, given back already, or queued again
		}
		d := rep.add(Diff{Kind: DiffDeadLetter, UserID: dl.user, OrderID: dl.order,
			Detail: "dead-lettered (" + dl.reason + "); the buyer still holds a unit"})
		if strings.Contains(dl.reason, store.ErrStockShort.Error()) {
			// MySQL had no unit for it: Redis sold one too many, and giving
			// it back would sell it again to someone MySQL cannot serve.
			d.Detail += "; not given back: MySQL had no stock for it"
			continue
		}
		if fix {
			n, err := restoreScript.Exec(ctx, r.client, []string{vk.meta, vk.buyers}, []string{itoa(dl.user), itoa(dl.order)}).AsInt64()
			if err != nil {
				return err
			}
			d.Fixed = n == 1
			if n == -1 {
				d.Detail += "; not given back: the stock is full"
			}
		}
	}
	for user, order := range mysql {
		if _, ok := rs.buyers[user]; ok {
			continue
		}
		// The buyer may have been accepted after the buyers were read.
		err := r.client.Do(ctx, r.client.B().Hget().Key(vk.buyers).Field(itoa(user)).Build()).Error()
		if err == nil {
			continue
		}
		if !rueidis.IsRedisNil(err) {
			return err
		}
		rep.add(Diff{Kind: DiffUnknownOrder, UserID: user, OrderID: order, Detail: "in MySQL; the user is no buyer in Redis"})
	}
	return nil
}

// checkRegistered reports a voucher with waiting orders that is not in the
// registry, and registers it with fix. The orders are counted again after
// the registry is read: a worker retires a voucher only once nothing
// waits, so orders still there then are ones nobody will read.
func (r *Reconciler) checkRegistered(ctx context.Context, vk voucherKeys, rep *Report, waiting int, fix bool) error {
	if waiting == 0 {
		return nil
	}
	id := itoa(rep.VoucherID)
	ok, err := r.client.Do(ctx, r.client.B().Sismember().Key(r.keys.registry()).Member(id).Build()).AsBool()
	if err != nil || ok {
		return err
	}
	unacked, err := unackedScript.Exec(ctx, r.client, []string{vk.orders}, []string{r.group}).AsStrSlice()
	if err != nil || len(unacked) == 0 {
		return err
	}
	d := rep.add(Diff{Kind: DiffUnregistered, Detail: fmt.Sprintf("%d orders wait in the stream; the voucher is not in the registry, so no consumer reads them", len(unacked))})
	if fix {
		if err := r.client.Do(ctx, r.client.B().Sadd().Key(r.keys.registry()).Member(id).Build()).Error(); err != nil {
			return err
		}
		d.Fixed = true
	}
	return nil
}

// requeue appends an accepted order to the voucher's stream again, then
// registers the voucher (in that order, see worker.retireIfDone).
func (r *Reconciler) requeue(ctx context.Context, vk voucherKeys, voucher, user, order int64) (bool, error) {
	n, err := requeueScript.Exec(ctx, r.client, []string{vk.buyers, vk.orders}, []string{itoa(user), itoa(order)}).AsInt64()
	if err != nil || n == 0 {
		return false, err
	}
	err = r.client.Do(ctx, r.client.B().Sadd().Key(r.keys.registry()).Member(itoa(voucher)).Build()).Error()
	return err == nil, err
}

// readRedis reads a voucher's buyers, then its unacknowledged orders, then
// its dead letters: an order is acknowledged only after it is persisted or
// dead-lettered, so one that leaves the stream meanwhile is found later.
func (r *Reconciler) readRedis(ctx context.Context, vk voucherKeys) (redisSide, error) {
	rs := redisSide{buyers: map[int64]int64{}, inFlight: map[int64]bool{}}
	var cursor uint64
	for {
		e, err := r.client.Do(ctx, r.client.B().Hscan().Key(vk.buyers).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return rs, err
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			user, err1 := strconv.ParseInt(e.Elements[i], 10, 64)
			order, err2 := strconv.ParseInt(e.Elements[i+1], 10, 64)
			if err1 != nil || err2 != nil {
				return rs, fmt.Errorf("malformed buyer %q → %q", e.Elements[i], e.Elements[i+1])
			}
			rs.buyers[user] = order
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	unacked, err := unackedScript.Exec(ctx, r.client, []string{vk.orders}, []string{r.group}).AsStrSlice()
	if err != nil {
		return rs, err
	}
	for _, o := range unacked {
		if id, err := strconv.ParseInt(o, 10, 64); err == nil {
			rs.inFlight[id] = true
		}
	}
	start := "-"
	for {
		page, err := r.client.Do(ctx, r.client.B().Xrange().Key(vk.dead).Start(start).End("+").Count(1000).Build()).AsXRange()
		if err != nil {
			return rs, err
		}
		for _, e := range page {
			order, _ := strconv.ParseInt(e.FieldValues["o"], 10, 64)
			user, _ := strconv.ParseInt(e.FieldValues["u"], 10, 64)
			rs.dead = append(rs.dead, deadLetter{order: order, user: user, reason: e.FieldValues["reason"]})
		}
		if len(page) < 1000 {
			return rs, nil
		}
		start = "(" + page[len(page)-1].ID
	}
}

// itoa formats an id.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
