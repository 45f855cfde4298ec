package async

import (
	"context"
	"fmt"
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
	if err := s.loadRedis(ctx, v, snapshot{}); err != nil {
		s.undoCreate(ctx, v)
		return unavailable(fmt.Sprintf("create voucher %d: load into Redis (the voucher was not created)", v.ID), err)
	}
	s.rows.Put(v)
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
	snap, err := layout.ReadSnapshot(ctx, s.client, s.keys, id, v.ShardCount(), layout.QuickHeld)
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
	snaps, err := layout.ReadSnapshots(ctx, s.client, vks, layout.QuickHeld)
	if err != nil {
		return nil, unavailable("find vouchers", err)
	}
	for i, v := range vs {
		snap := snaps[i]
		if v.ShardCount() > 1 { // a few more round trips: the sums over its shards
			if snap, err = layout.ReadSnapshot(ctx, s.client, s.keys, v.ID, v.ShardCount(), layout.QuickHeld); err != nil {
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
	v, err := s.rows.Voucher(ctx, id)
	if err != nil {
		return flashsale.Voucher{}, err
	}
	return *v, nil
}

// Backlog returns how many accepted orders are not persisted yet, summed
// over the registered vouchers: what a readiness check watches.
func (s *Service) Backlog(ctx context.Context) (int64, error) {
	return layout.Backlog(ctx, s.client, s.keys, s.cfg.Group)
}
