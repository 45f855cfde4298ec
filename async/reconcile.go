package async

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// ReconcilerConfig configures a Reconciler; Prefix and Group must be the
// Service's.
type ReconcilerConfig struct {
	Prefix string
	Group  string
	Logger *slog.Logger
}

// Reconciler compares, per voucher, what Redis accepted (buyers, stock,
// orders waiting in the stream, dead letters) with what MySQL holds
// (orders, remaining stock), reports every difference as a Diff (Check), and
// repairs the ones that are safe (Repair): it re-queues lost orders, registers
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
	db     AuditStore
	keys   keyspace
	group  string
	log    *slog.Logger
}

// NewReconciler returns a Reconciler.
func NewReconciler(client rueidis.Client, db AuditStore, cfg ReconcilerConfig) *Reconciler {
	return &Reconciler{
		client: client,
		db:     db,
		keys:   keyspace{orDefault(cfg.Prefix, DefaultPrefix)},
		group:  orDefault(cfg.Group, DefaultGroup),
		log:    orDefault(cfg.Logger, slog.Default()),
	}
}

// CheckAll reports the differences of every voucher in MySQL, repairing
// nothing.
func (r *Reconciler) CheckAll(ctx context.Context) ([]*Report, error) { return r.all(ctx, false) }

// RepairAll reports the differences of every voucher in MySQL and repairs
// what is safe, as Repair does.
func (r *Reconciler) RepairAll(ctx context.Context) ([]*Report, error) { return r.all(ctx, true) }

// all reconciles every voucher in MySQL, repairing with fix.
func (r *Reconciler) all(ctx context.Context, fix bool) ([]*Report, error) {
	vs, err := r.db.ListVouchers(ctx)
	if err != nil {
		return nil, err
	}
	reports := make([]*Report, 0, len(vs))
	for _, v := range vs {
		rep, err := r.voucher(ctx, v.ID, fix)
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
	kind        DeadKind // "" in entries written before dead letters had one
	reason      string
}

// legacyStockShort starts the reason of a stock-short dead letter written
// before dead letters had a kind: the store's error text then.
const legacyStockShort = "store: stock short"

// stockShort reports whether the order was dead-lettered because MySQL had
// no stock left for it. An entry without a kind (written before kinds
// existed) tells by its reason, which then quotes legacyStockShort.
func (dl deadLetter) stockShort() bool {
	if dl.kind != "" {
		return dl.kind == DeadStockShort
	}
	return strings.Contains(dl.reason, legacyStockShort)
}

// Check reports the differences of one voucher, repairing nothing. It
// returns ENotFound when the voucher is not in MySQL.
func (r *Reconciler) Check(ctx context.Context, id int64) (*Report, error) {
	return r.voucher(ctx, id, false)
}

// Repair reports the differences of one voucher and repairs the ones that
// are safe to repair (see Reconciler); a repaired Diff has Fixed set. It
// returns ENotFound when the voucher is not in MySQL.
func (r *Reconciler) Repair(ctx context.Context, id int64) (*Report, error) {
	return r.voucher(ctx, id, true)
}

// voucher reconciles one voucher, repairing with fix.
func (r *Reconciler) voucher(ctx context.Context, id int64, fix bool) (*Report, error) {
	rep := &Report{VoucherID: id}
	shards, sides, err := r.readShardsRedis(ctx, id, rep, fix)
	if err != nil {
		return nil, err
	}
	// MySQL last: whatever left the stream before is in MySQL by now.
	audit, err := r.db.AuditVoucher(ctx, id)
	if err != nil {
		return nil, err
	}
	orders, err := r.db.HeldOrders(ctx, id)
	if err != nil {
		return nil, err
	}
	rep.Remaining, rep.Orders = audit.Remaining, audit.Orders
	if audit.Remaining+audit.Orders != audit.Stock || audit.DuplicateBuyers > 0 {
		rep.add(Diff{Kind: DiffMySQLStock, Detail: fmt.Sprintf("MySQL: stock %d, remaining %d, orders %d, users with two orders %d",
			audit.Stock, audit.Remaining, audit.Orders, audit.DuplicateBuyers)})
	}
	if !rep.Loaded {
		// A sale that is over leaves Redis once drained (retire.go).
		if rep.Retired, err = r.over(ctx, id); err != nil {
			return nil, err
		}
		if !rep.Retired {
			rep.add(Diff{Kind: DiffNotLoaded, Detail: "the voucher is not in Redis"})
		}
		return rep, nil
	}
	if rep.Stock+rep.Buyers != rep.InitialStock || rep.InitialStock != audit.Stock {
		rep.add(Diff{Kind: DiffRedisStock, Detail: fmt.Sprintf("Redis: stock %d + buyers %d, initial stock %d; MySQL stock %d",
			rep.Stock, rep.Buyers, rep.InitialStock, audit.Stock)})
	}
	if err := r.compareShards(ctx, shards, sides, rep, orders, fix); err != nil {
		return rep, err
	}
	for _, d := range rep.Diffs {
		r.log.Warn("async: reconcile: difference", "voucher", id, "kind", d.Kind, "user", d.UserID, "order", d.OrderID, "detail", d.Detail, "fixed", d.Fixed)
	}
	return rep, nil
}

// over reports whether a voucher's sale is over, by this process's clock.
func (r *Reconciler) over(ctx context.Context, id int64) (bool, error) {
	v, err := r.db.Voucher(ctx, id)
	if err != nil {
		return false, err
	}
	return !time.Now().Before(v.EndTime), nil
}

// compare reports the differences between the buyers and the orders, and
// repairs them with fix: first every buyer Redis holds, then the dead
// letters, then MySQL's orders whose user Redis does not know.
func (r *Reconciler) compare(ctx context.Context, vk voucherKeys, rep *Report, rs redisSide, mysql map[int64]int64, fix bool) error {
	if err := r.compareBuyers(ctx, vk, rep, rs, mysql, fix); err != nil {
		return err
	}
	if err := r.compareDeadLetters(ctx, vk, rep, rs, mysql, fix); err != nil {
		return err
	}
	return r.findUnknownOrders(ctx, vk, rep, rs, mysql)
}

// compareBuyers checks each buyer's order against MySQL: the same order,
// another one (repointed with fix), in flight, dead-lettered (left to
// compareDeadLetters), or lost (re-queued with fix).
func (r *Reconciler) compareBuyers(ctx context.Context, vk voucherKeys, rep *Report, rs redisSide, mysql map[int64]int64, fix bool) error {
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
			// Reported by compareDeadLetters.
		default:
			d := rep.add(Diff{Kind: DiffLostOrder, UserID: user, OrderID: order,
				Detail: "accepted by Redis; not in MySQL, the stream or the dead letters"})
			if fix {
				fixed, err := r.requeue(ctx, vk, user, order)
				if err != nil {
					return err
				}
				d.Fixed = fixed
			}
		}
	}
	return nil
}

// compareDeadLetters reports each dead-lettered order whose buyer still
// holds its unit, and with fix gives the unit back, unless MySQL had no
// stock for the order.
func (r *Reconciler) compareDeadLetters(ctx context.Context, vk voucherKeys, rep *Report, rs redisSide, mysql map[int64]int64, fix bool) error {
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
		if dl.stockShort() {
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
	return nil
}

// findUnknownOrders reports MySQL's orders whose user is no buyer in Redis.
func (r *Reconciler) findUnknownOrders(ctx context.Context, vk voucherKeys, rep *Report, rs redisSide, mysql map[int64]int64) error {
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
	id := vk.body // the voucher's id, or its shard's tag
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
func (r *Reconciler) requeue(ctx context.Context, vk voucherKeys, user, order int64) (bool, error) {
	n, err := requeueScript.Exec(ctx, r.client, []string{vk.buyers, vk.orders}, []string{itoa(user), itoa(order)}).AsInt64()
	if err != nil || n == 0 {
		return false, err
	}
	err = r.client.Do(ctx, r.client.B().Sadd().Key(r.keys.registry()).Member(vk.body).Build()).Error()
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
			order, _ := strconv.ParseInt(e.FieldValues[fieldOrder], 10, 64)
			user, _ := strconv.ParseInt(e.FieldValues[fieldUser], 10, 64)
			rs.dead = append(rs.dead, deadLetter{order: order, user: user,
				kind: DeadKind(e.FieldValues[fieldKind]), reason: e.FieldValues[fieldReason]})
		}
		if len(page) < 1000 {
			return rs, nil
		}
		start = "(" + page[len(page)-1].ID
	}
}

// itoa formats an id.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
