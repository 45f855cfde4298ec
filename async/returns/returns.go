// Package returns puts the units of cancelled and expired orders back into
// the async gate's stock in Redis: the second half of a return, after
// package lifecycle committed the first in the system of record. It
// implements lifecycle.Restocker. Each order's units go back once, on the
// shard that holds its buyer, however often a crash makes a return run;
// and as durably as the gate's orders (in durability replica a WAIT
// follows). It meets the gate only in Redis (async/internal/layout).
package returns

import (
	"cmp"
	"context"
	_ "embed" // the Lua script
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/lifecycle"
)

var (
	//go:embed return.lua
	returnLua    string
	returnScript = luascript.New(returnLua)
)

// Config configures a Restocker.
type Config struct {
	// Prefix starts every key; the gate's (default layout.DefaultPrefix).
	Prefix string
	// MinReplicas, when positive, is how many replicas must have a return
	// before Restock reports it done (durability replica), within
	// ReplicaTimeout (default 1s).
	MinReplicas    int
	ReplicaTimeout time.Duration
}

// Restocker puts closed orders' units back into the gate's stock.
type Restocker struct {
	client rueidis.Client
	keys   layout.Keyspace
	cfg    Config
}

var _ lifecycle.Restocker = (*Restocker)(nil)

// New returns a Restocker on the gate's Redis.
func New(client rueidis.Client, cfg Config) *Restocker {
	cfg.ReplicaTimeout = cmp.Or(cfg.ReplicaTimeout, time.Second)
	return &Restocker{client: client, keys: layout.New(cfg.Prefix), cfg: cfg}
}

// Restock puts the orders' units back, in one round trip per voucher
// count of shards; an order whose units are back already is passed over.
func (r *Restocker) Restock(ctx context.Context, orders []*flashsale.Order) error {
	byVoucher := map[int64][]*flashsale.Order{}
	for _, o := range orders {
		byVoucher[o.VoucherID] = append(byVoucher[o.VoucherID], o)
	}
	for _, v := range slices.Sorted(maps.Keys(byVoucher)) {
		if err := r.restock(ctx, v, byVoucher[v]); err != nil {
			return fmt.Errorf("returns: voucher %d: %w", v, err)
		}
	}
	return nil
}

// restock puts back the units of one voucher's orders.
func (r *Restocker) restock(ctx context.Context, voucherID int64, orders []*flashsale.Order) error {
	n, err := layout.ShardCount(ctx, r.client, r.keys, voucherID)
	if err != nil {
		return err
	}
	shards := r.keys.Shards(voucherID, n)
	args := make([][]string, len(shards))
	for _, o := range orders {
		k := layout.HomeShard(o.UserID, len(shards))
		args[k] = append(args[k], strconv.FormatInt(o.ID, 10), strconv.FormatInt(o.UserID, 10), strconv.Itoa(o.Units()))
	}
	var execs []rueidis.LuaExec
	for k, a := range args {
		if a != nil {
			execs = append(execs, rueidis.LuaExec{Keys: []string{shards[k].Meta, shards[k].Buyers, shards[k].Returned, shards[k].Fence}, Args: a})
		}
	}
	if r.cfg.MinReplicas > 0 {
		if err := r.restockReplicated(ctx, shards[0], execs); err != nil {
			return err
		}
	} else {
		for _, res := range returnScript.ExecMulti(ctx, r.client, execs...) {
			if err := res.Error(); err != nil {
				return err
			}
		}
	}
	r.announce(ctx, voucherID)
	return nil
}

// announce tells every gate that the voucher's units came back, so an
// instance that remembers it sold out asks Redis again at once. It is
// best effort: a gate that misses it asks again when its memory of the
// sell-out runs out (async.Config.VerdictTTL).
func (r *Restocker) announce(ctx context.Context, voucherID int64) {
	cmd := r.client.B().Publish().Channel(r.keys.ReturnsChannel()).Message(strconv.FormatInt(voucherID, 10)).Build()
	_ = r.client.Do(ctx, cmd).Error()
}
