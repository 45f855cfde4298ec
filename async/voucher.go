package async

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// loadTimeout bounds a reload, which runs detached from the request that
// asked for it: the requests waiting for it share its outcome.
const loadTimeout = 30 * time.Second

// buyersChunk is how many buyers one HSET restores.
const buyersChunk = 1000

// CreateVoucher validates v, assigns its id, stores it in MySQL and loads
// its stock and sale window into Redis, so it can be sold. If Redis cannot
// be loaded, the MySQL row is deleted again and the error returned
// (EUnavailable): a voucher is created in both or in neither. It takes up
// to a second more when its shards' slots are new to the ID generator.
func (s *Service) CreateVoucher(ctx context.Context, v *flashsale.Voucher) error {
	if err := v.Validate(); err != nil {
		return err
	}
	if v.ShardCount() > 1 && s.cfg.Durability.Mode == DurabilityReplica {
		return flashsale.Errorf(flashsale.EInvalid, "shards > 1 is not supported with durability replica (each shard would need its own WAIT)")
	}
	id, err := s.cfg.OrderIDs.NextID(ctx)
	if err != nil {
		return unavailable("voucher id", err)
	}
	v.ID = id
	if err := s.db.CreateVoucher(ctx, v); err != nil {
		return err
	}
	if err := s.loadRedis(ctx, v, nil); err != nil {
		s.undoCreate(ctx, v)
		return unavailable(fmt.Sprintf("create voucher %d: load into Redis (the voucher was not created)", v.ID), err)
	}
	s.statics.Store(v.ID, *v)
	s.prepareIDs(ctx, v)
	return nil
}

// prepareIDs takes an order id in each shard's slot, so that a slot new
// to the ID generator waits for its first range (up to a second: a new
// idgen hash) before the voucher is created rather than at its first
// orders, which would all wait. A failure only logs: the first order
// tries again.
func (s *Service) prepareIDs(ctx context.Context, v *flashsale.Voucher) {
	ids := s.cfg.OrderIDs
	var wg sync.WaitGroup
	for _, vk := range s.keys.Shards(v.ID, v.ShardCount()) {
		wg.Go(func() {
			if _, err := ids.NextIDIn(ctx, vk.Slot); err != nil {
				s.log.Warn("async: preparing order ids", "voucher", v.ID, "slot", vk.Slot, "err", err)
			}
		})
	}
	wg.Wait()
}

// undoCreate removes what a failed CreateVoucher wrote. The load script
// either ran or not, but a timeout cannot tell which, so the Redis keys are
// deleted too; nobody has the voucher's id yet, so nobody has bought.
func (s *Service) undoCreate(ctx context.Context, v *flashsale.Voucher) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
	defer cancel()
	id := v.ID
	var cmds rueidis.Commands
	for _, vk := range s.keys.Shards(id, v.ShardCount()) { // one DEL per slot
		cmds = append(cmds, s.client.B().Del().Key(vk.Meta, vk.Buyers, vk.Orders).Build(),
			s.client.B().Srem().Key(s.keys.Registry()).Member(vk.Body).Build())
	}
	if v.ShardCount() > 1 {
		cmds = append(cmds, s.client.B().Del().Key(s.keys.ShardCountKey(id)).Build())
	}
	for _, cmd := range s.client.DoMulti(ctx, cmds...) {
		if err := cmd.Error(); err != nil {
			s.log.Error("async: undoing a voucher: Redis keys left behind (reconcile reports them)", "voucher", id, "err", err)
		}
	}
	if err := s.db.DeleteVoucherWithoutOrders(ctx, id); err != nil {
		s.log.Error("async: undoing a voucher: MySQL row left behind; it is reloaded into Redis when first ordered", "voucher", id, "err", err)
	}
}

// FindVoucher returns the voucher with its live figures from Redis:
// Remaining is the gate's stock and Orders the number of buyers it
// accepted, persisted or not. A voucher not loaded in Redis has the
// figures MySQL holds. It returns ENotFound when there is no such voucher.
func (s *Service) FindVoucher(ctx context.Context, id int64) (*flashsale.Voucher, error) {
	v, err := s.static(ctx, id)
	if err != nil {
		return nil, err
	}
	snap, err := layout.ReadSnapshot(ctx, s.client, s.keys, id, v.ShardCount())
	if err != nil {
		return nil, unavailable(fmt.Sprintf("find voucher %d", id), err)
	}
	if snap.Loaded {
		v.Remaining, v.Orders = snap.Stock, snap.Orders
		return &v, nil
	}
	return s.db.FindVoucher(ctx, id)
}

// FindVouchers returns a page of vouchers from MySQL (see
// store.DB.FindVouchers) with the figures FindVoucher gives: Redis's for
// the vouchers loaded there, read in one pipelined round of snapshots, and
// MySQL's for the others.
func (s *Service) FindVouchers(ctx context.Context, before int64, limit int) ([]*flashsale.Voucher, error) {
	vs, err := s.db.FindVouchers(ctx, before, limit)
	if err != nil || len(vs) == 0 {
		return vs, err
	}
	vks := make([]layout.VoucherKeys, len(vs))
	for i, v := range vs {
		vks[i] = s.keys.Voucher(v.ID)
	}
	snaps, err := layout.ReadSnapshots(ctx, s.client, vks)
	if err != nil {
		return nil, unavailable("find vouchers", err)
	}
	for i, v := range vs {
		snap := snaps[i]
		if v.ShardCount() > 1 { // a few more round trips: the sums over its shards
			if snap, err = layout.ReadSnapshot(ctx, s.client, s.keys, v.ID, v.ShardCount()); err != nil {
				return nil, unavailable("find vouchers", err)
			}
		}
		if snap.Loaded {
			v.Remaining, v.Orders = snap.Stock, snap.Orders
		}
	}
	return vs, nil
}

// static returns a copy of the voucher's row, read from MySQL once.
func (s *Service) static(ctx context.Context, id int64) (flashsale.Voucher, error) {
	if v, ok := s.statics.Load(id); ok {
		return v.(flashsale.Voucher), nil
	}
	v, err := s.db.Voucher(ctx, id)
	if err != nil {
		return flashsale.Voucher{}, err
	}
	s.statics.Store(id, *v)
	return *v, nil
}

// Reload loads a voucher from MySQL into Redis if it is missing there:
// its sale window, the stock MySQL has left, its buyers and the orders
// still in its stream. It is idempotent and safe beside other instances.
// It returns EEnded for a sale that is over, ENotFound for a voucher MySQL
// does not have, and EUnavailable when ctx ends first (the load goes on).
func (s *Service) Reload(ctx context.Context, voucherID int64) error {
	load := s.loads.DoChan(strconv.FormatInt(voucherID, 10), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		return nil, s.reload(ctx, voucherID)
	})
	select {
	case r := <-load:
		return r.Err
	case <-ctx.Done():
		return unavailable(fmt.Sprintf("reload voucher %d", voucherID), ctx.Err())
	}
}

// reload is Reload without the sharing.
func (s *Service) reload(ctx context.Context, voucherID int64) error {
	if v, err := s.static(ctx, voucherID); err == nil && v.ShardCount() > 1 {
		return s.reloadShards(ctx, &v)
	}
	vk := s.keys.Voucher(voucherID)
	n, err := s.client.Do(ctx, s.client.B().Exists().Key(vk.Meta).Build()).AsInt64()
	if err != nil {
		return unavailable(fmt.Sprintf("reload voucher %d", voucherID), err)
	}
	if n == 1 {
		return nil
	}
	// A sale that is over is not loaded again: its keys were retired (or
	// lost) and MySQL answers for it.
	if v, err := s.static(ctx, voucherID); err != nil || !time.Now().Before(v.EndTime) {
		return cmp.Or(err, refusal(flashsale.EEnded, 0))
	}
	// One snapshot: the remaining stock and the orders that took the rest.
	v, orders, err := s.db.VoucherSnapshot(ctx, voucherID)
	if err != nil {
		return err
	}
	if err := s.loadRedis(ctx, v, orders); err != nil {
		return unavailable(fmt.Sprintf("reload voucher %d", voucherID), err)
	}
	s.logLoaded(voucherID, v.Remaining, len(orders))
	return nil
}

// loadRedis writes a voucher into Redis (each of its shards when it has
// several: loadShards): the buyers of orders, then the registry entry,
// then, atomically and only if it is still missing, the meta hash with the
// consumer group. The gate sells nothing until the last step, so it never
// sees half a voucher.
func (s *Service) loadRedis(ctx context.Context, v *flashsale.Voucher, orders []flashsale.Order) error {
	if n := v.ShardCount(); n > 1 {
		shards := s.keys.Shards(v.ID, n)
		all := make([]int, n)
		for k := range all {
			all[k] = k
		}
		return s.loadShards(ctx, v, shards, all, v.Remaining, orders)
	}
	return s.loadKeys(ctx, s.keys.Voucher(v.ID), v, orders, v.Remaining, v.Stock)
}

// loadKeys loads one set of a voucher's keys (the voucher's, or one
// shard's) from a snapshot's orders whose buyers they hold: the live
// orders' buyers, the closed orders whose returns are pending (MySQL's
// remaining counts them, so their returns must not add them again), the
// registry entry, then load.lua with the stock remaining and the initial
// stock.
func (s *Service) loadKeys(ctx context.Context, vk layout.VoucherKeys, v *flashsale.Voucher, orders []flashsale.Order, remaining, initial int) error {
	buyers, returned, persisted := snapshotRecords(orders)
	if err := s.hsetChunked(ctx, vk.Buyers, buyers); err != nil {
		return err
	}
	if err := s.hsetChunked(ctx, vk.Returned, returned); err != nil {
		return err
	}
	// Registered before it can take orders: a consumer may find it before
	// its stream exists, and waits.
	if err := s.client.Do(ctx, s.client.B().Sadd().Key(s.keys.Registry()).Member(vk.Body).Build()).Error(); err != nil {
		return err
	}
	window := int64(v.PaymentWindow() / time.Microsecond)
	args := []string{strconv.Itoa(remaining), strconv.Itoa(initial), layout.Micros(v.BeginTime), layout.Micros(v.EndTime), s.cfg.Group,
		strconv.Itoa(v.BuyerLimit()), strconv.FormatInt(window, 10), strconv.Itoa(len(persisted))}
	args = append(args, s.streamPersisted(ctx, vk, persisted)...)
	return loadScript.Exec(ctx, s.client, []string{vk.Meta, vk.Buyers, vk.Orders, vk.Keyed, vk.Returned}, args).Error()
}

// snapshotRecords returns, from a snapshot's orders, the buyers hash's
// fields and values (each buyer's live units and latest order), the
// returned hash's (closed orders with pending returns), and the set of the
// live orders' ids.
func snapshotRecords(orders []flashsale.Order) (buyers, returned []string, persisted map[string]bool) {
	units, latest := map[int64]int64{}, map[int64]int64{}
	persisted = map[string]bool{}
	for _, o := range orders {
		id := strconv.FormatInt(o.ID, 10)
		if !o.Status.Live() {
			returned = append(returned, id, strconv.Itoa(o.Units()))
			continue
		}
		persisted[id] = true
		units[o.UserID] += int64(o.Units())
		latest[o.UserID] = max(latest[o.UserID], o.ID)
	}
	for u, n := range units {
		buyers = append(buyers, strconv.FormatInt(u, 10), layout.BuyerValue(n, strconv.FormatInt(latest[u], 10)))
	}
	return buyers, returned, persisted
}

// hsetChunked writes fields and values kv into the hash key, a chunk per
// command.
func (s *Service) hsetChunked(ctx context.Context, key string, kv []string) error {
	for start := 0; start < len(kv); start += 2 * buyersChunk {
		cmd := s.client.B().Hset().Key(key).FieldValue()
		chunk := kv[start:min(start+2*buyersChunk, len(kv))]
		for i := 0; i+1 < len(chunk); i += 2 {
			cmd = cmd.FieldValue(chunk[i], chunk[i+1])
		}
		if err := s.client.Do(ctx, cmd.Build()).Error(); err != nil {
			return err
		}
	}
	return nil
}

// streamPersisted returns the ids of the orders in the voucher's stream
// that the snapshot holds already (persisted, not acknowledged yet), for
// load.lua to pass over. The stream cannot grow while the voucher is not
// loaded; what leaves it meanwhile is persisted.
func (s *Service) streamPersisted(ctx context.Context, vk layout.VoucherKeys, persisted map[string]bool) []string {
	entries, err := s.client.Do(ctx, s.client.B().Xrange().Key(vk.Orders).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		return nil // counted as not persisted: fewer units sold, never twice
	}
	var ids []string
	for _, e := range entries {
		if id := e.FieldValues[layout.FieldOrder]; persisted[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// Backlog returns how many accepted orders are not persisted yet, summed
// over the registered vouchers: what a readiness check watches.
func (s *Service) Backlog(ctx context.Context) (int64, error) {
	return layout.Backlog(ctx, s.client, s.keys, s.cfg.Group)
}
