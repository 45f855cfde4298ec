// Package reconcile compares what the async pipeline's Redis accepted with
// what the system of record holds, per voucher, reports every difference
// (Check) and repairs the ones that are safe (Repair). It never calls the
// gate (package async): the two meet only in Redis (async/internal/layout).
// How it decides what is safe is in DESIGN.md beside this file.
package reconcile

import (
	"cmp"
	"context"
	_ "embed" // the Lua scripts
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/async/returns"
	"github.com/flashsale/flashsale/lifecycle"
)

// Config configures a Reconciler; Prefix and Group must be the gate's
// (defaults: the pipeline's).
type Config struct {
	Prefix string
	Group  string
	Logger *slog.Logger
	// Returns finishes half-done returns (default: into the gate's stock
	// under Prefix, without WAIT).
	Returns lifecycle.Restocker
}

// AuditStore reads what reconciliation compares Redis with: what the
// reconciler needs from the system of record (*store.DB, passed in by
// cmd).
type AuditStore interface {
	ListVouchers(ctx context.Context) ([]*flashsale.Voucher, error)
	Voucher(ctx context.Context, id int64) (*flashsale.Voucher, error)
	AuditVoucher(ctx context.Context, id int64) (flashsale.Audit, error)
	HeldOrders(ctx context.Context, voucherID int64) ([]flashsale.Order, error)
	// PendingReturnsOf returns the voucher's closed orders, closed before
	// the given time, whose returns are not marked done; MarkReturned
	// marks them.
	PendingReturnsOf(ctx context.Context, voucherID int64, before time.Time) ([]*flashsale.Order, error)
	MarkReturned(ctx context.Context, ids []int64) error
	// FindOrder returns an order, live or closed.
	FindOrder(ctx context.Context, id int64) (*flashsale.Order, error)
}

// The reconciler's own Lua scripts. Each repair checks that the buyer
// still records the order it is about, so running it twice, or beside the
// live pipeline, does no harm.
var (
	//go:embed requeue.lua
	requeueLua string
	//go:embed restore.lua
	restoreLua string
	//go:embed repoint.lua
	repointLua string
	//go:embed retire.lua
	retireLua string

	requeueScript = rueidis.NewLuaScript(requeueLua)
	restoreScript = rueidis.NewLuaScript(restoreLua)
	repointScript = rueidis.NewLuaScript(repointLua)
	retireScript  = rueidis.NewLuaScript(retireLua)
)

// Reconciler compares, per voucher, what Redis accepted (buyers, stock,
// orders waiting in the stream, dead letters) with what MySQL holds
// (orders, remaining stock), reports each difference as a Diff, and
// repairs those that are safe: it never writes MySQL, Redis's stock by an
// absolute value, the streams' pending entries, or a voucher not loaded in
// Redis. It is safe for concurrent use beside the live pipeline.
type Reconciler struct {
	client  rueidis.Client
	db      AuditStore
	keys    layout.Keyspace
	group   string
	log     *slog.Logger
	returns lifecycle.Restocker
}

// New returns a Reconciler.
func New(client rueidis.Client, db AuditStore, cfg Config) *Reconciler {
	return &Reconciler{
		client:  client,
		db:      db,
		keys:    layout.New(cfg.Prefix),
		group:   cmp.Or(cfg.Group, layout.DefaultGroup),
		log:     cmp.Or(cfg.Logger, slog.Default()),
		returns: cmp.Or[lifecycle.Restocker](cfg.Returns, returns.New(client, returns.Config{Prefix: cfg.Prefix})),
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
	if audit.Remaining+audit.Units != audit.Stock || audit.DuplicateBuyers > 0 {
		rep.add(Diff{Kind: DiffMySQLStock, Detail: fmt.Sprintf("MySQL: stock %d, remaining %d, units of live orders %d, users past the limit %d",
			audit.Stock, audit.Remaining, audit.Units, audit.DuplicateBuyers)})
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
	if rep.Stock+rep.Held != rep.InitialStock || rep.InitialStock != audit.Stock {
		rep.add(Diff{Kind: DiffRedisStock, Detail: fmt.Sprintf("Redis: stock %d + units held %d, initial stock %d; MySQL stock %d",
			rep.Stock, rep.Held, rep.InitialStock, audit.Stock)})
	}
	if err := r.compareShards(ctx, shards, sides, rep, orders, fix); err != nil {
		return rep, err
	}
	if err := r.finishReturns(ctx, id, rep, fix); err != nil {
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

// itoa formats an id.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
