package async

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// reloadAttempts bounds the snapshots a reload reads when returns keep
// making them stale (errStale).
const reloadAttempts = 5

// errStale says load.lua refused a snapshot: a return ran while the keys
// were not loaded, after the fence was read, so the snapshot may show the
// returned order still holding its units. The reload reads MySQL again.
var errStale = errors.New("async: a return ran during the reload; its snapshot is stale")

// snapshot is what a reload read: MySQL's orders, and the fences read
// before them.
type snapshot struct {
	orders []flashsale.Order // live, and closed with their returns pending
	keyed  []flashsale.Order // every order placed with an idempotency key
	fences map[string]string // a fence key → its value ("" for none)
}

// Reload loads a voucher from MySQL into Redis if it is missing there:
// its sale window, the stock MySQL has left, its buyers, the orders placed
// with an idempotency key and the orders still in its stream. It is
// idempotent and safe beside other instances and returns. It returns
// EEnded for a sale that is over, ENotFound for a voucher MySQL does not
// have, and EUnavailable when ctx ends first (the load goes on).
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
		return retryStale(func() error { return s.reloadShards(ctx, &v) })
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
	return retryStale(func() error {
		v, snap, err := s.readSnapshot(ctx, voucherID, []layout.VoucherKeys{vk})
		if err != nil {
			return err
		}
		if err := s.loadRedis(ctx, v, snap); err != nil {
			return unavailable(fmt.Sprintf("reload voucher %d", voucherID), err)
		}
		s.logLoaded(voucherID, v.Remaining, len(snap.orders))
		return nil
	})
}

// retryStale runs load again while it returns errStale, up to
// reloadAttempts times in all.
func retryStale(load func() error) error {
	for attempt := 1; ; attempt++ {
		err := load()
		if !errors.Is(err, errStale) || attempt == reloadAttempts {
			return err
		}
	}
}

// readSnapshot reads the fences of the keys to load and the ids in their
// streams, then MySQL's snapshot of the voucher: the stream cannot grow
// while the keys are not loaded, and what leaves it meanwhile is
// persisted, so the snapshot holds it.
func (s *Service) readSnapshot(ctx context.Context, voucherID int64, load []layout.VoucherKeys) (*flashsale.Voucher, snapshot, error) {
	snap := snapshot{fences: map[string]string{}}
	var stream []int64
	for _, vk := range load {
		f, err := s.client.Do(ctx, s.client.B().Get().Key(vk.Fence).Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, snap, unavailable(fmt.Sprintf("reload voucher %d", voucherID), err)
		}
		snap.fences[vk.Fence] = f
		entries, err := s.client.Do(ctx, s.client.B().Xrange().Key(vk.Orders).Start("-").End("+").Build()).AsXRange()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, snap, unavailable(fmt.Sprintf("reload voucher %d", voucherID), err)
		}
		for _, e := range entries {
			for _, o := range layout.EntryOrderIDs(e.FieldValues) {
				if id, err := strconv.ParseInt(o, 10, 64); err == nil {
					stream = append(stream, id)
				}
			}
		}
	}
	v, orders, keyed, err := s.db.ReloadSnapshot(ctx, voucherID, stream)
	if err != nil {
		return nil, snap, err
	}
	snap.orders, snap.keyed = orders, keyed
	return v, snap, nil
}

// loadRedis writes a voucher into Redis (each of its shards when it has
// several: loadShards) from a snapshot: the buyers of orders, then the
// registry entry, then, atomically and only if it is still missing and
// the fence unmoved, the meta hash with the consumer group. The gate sells
// nothing until the last step, so it never sees half a voucher.
func (s *Service) loadRedis(ctx context.Context, v *flashsale.Voucher, snap snapshot) error {
	if n := v.ShardCount(); n > 1 {
		shards := s.keys.Shards(v.ID, n)
		all := make([]int, n)
		for k := range all {
			all[k] = k
		}
		return s.loadShards(ctx, v, shards, all, v.Remaining, snap)
	}
	return s.loadKeys(ctx, s.keys.Voucher(v.ID), v, snap, v.Remaining, v.Stock)
}

// loadKeys loads one set of a voucher's keys (the voucher's, or one
// shard's) from a snapshot's orders whose buyers they hold. It stages, in
// keys of its own, the live orders' buyers, the closed orders whose
// returns are pending (MySQL's remaining counts them, so their returns
// must not add them again) and the keyed orders; registers the voucher;
// then load.lua takes the staged hashes in with the stock remaining and
// the initial stock, or drops them (loaded already; errStale).
func (s *Service) loadKeys(ctx context.Context, vk layout.VoucherKeys, v *flashsale.Voucher, snap snapshot, remaining, initial int) error {
	buyers, returned, persisted, live := snapshotRecords(snap.orders)
	stageBuyers, stageReturned, stageKeyed := vk.Staging(strconv.FormatUint(rand.Uint64(), 36))
	for _, st := range []struct {
		key string
		kv  []string
	}{{stageBuyers, buyers}, {stageReturned, returned}, {stageKeyed, keyedRecords(snap.keyed)}} {
		if err := s.hsetChunked(ctx, st.key, st.kv); err != nil {
			return err
		}
	}
	// Registered before it can take orders: a consumer may find it before
	// its stream exists, and waits.
	if err := s.client.Do(ctx, s.client.B().Sadd().Key(s.keys.Registry()).Member(vk.Body).Build()).Error(); err != nil {
		return err
	}
	window := int64(v.PaymentWindow() / time.Microsecond)
	args := []string{strconv.Itoa(remaining), strconv.Itoa(initial), layout.Micros(v.BeginTime), layout.Micros(v.EndTime), s.cfg.Group,
		strconv.Itoa(v.BuyerLimit()), strconv.FormatInt(window, 10), strconv.Itoa(live), snap.fences[vk.Fence]}
	args = append(args, s.streamPersisted(ctx, vk, persisted)...)
	keys := []string{vk.Meta, vk.Buyers, vk.Orders, vk.Keyed, vk.Returned, vk.Fence, stageBuyers, stageReturned, stageKeyed}
	loaded, err := loadScript.Exec(ctx, s.client, keys, args).AsInt64()
	if err == nil && loaded < 0 {
		err = errStale
	}
	return err
}

// snapshotRecords returns, from a snapshot's orders, the buyers hash's
// fields and values (each buyer's live units and latest order), the
// returned hash's (closed orders: MySQL's remaining counts their units),
// the set of the orders' ids (MySQL holds them) and the live orders'
// count.
func snapshotRecords(orders []flashsale.Order) (buyers, returned []string, persisted map[string]bool, live int) {
	units, latest := map[int64]int64{}, map[int64]int64{}
	persisted = map[string]bool{}
	for _, o := range orders {
		id := strconv.FormatInt(o.ID, 10)
		persisted[id] = true
		if !o.Status.Live() {
			returned = append(returned, id, strconv.Itoa(o.Units()))
			continue
		}
		live++
		units[o.UserID] += int64(o.Units())
		latest[o.UserID] = max(latest[o.UserID], o.ID)
	}
	for u, n := range units {
		buyers = append(buyers, strconv.FormatInt(u, 10), layout.BuyerValue(n, strconv.FormatInt(latest[u], 10)))
	}
	return buyers, returned, persisted, live
}

// keyedRecords returns the keyed hash's fields and values for orders
// placed with an idempotency key: "<user>:<key>" → "<order id>:" (no
// stream entry: the order is in MySQL, where the gate's answer finds it).
func keyedRecords(orders []flashsale.Order) []string {
	kv := make([]string, 0, 2*len(orders))
	for _, o := range orders {
		kv = append(kv, strconv.FormatInt(o.UserID, 10)+":"+o.IdempotencyKey, strconv.FormatInt(o.ID, 10)+":")
	}
	return kv
}

// hsetChunked writes fields and values kv into the hash key, a chunk per
// command, each followed by a lifetime of two loads' (key is a staging
// key: a reload that dies leaves nothing for long).
func (s *Service) hsetChunked(ctx context.Context, key string, kv []string) error {
	for start := 0; start < len(kv); start += 2 * buyersChunk {
		cmd := s.client.B().Hset().Key(key).FieldValue()
		chunk := kv[start:min(start+2*buyersChunk, len(kv))]
		for i := 0; i+1 < len(chunk); i += 2 {
			cmd = cmd.FieldValue(chunk[i], chunk[i+1])
		}
		ttl := s.client.B().Pexpire().Key(key).Milliseconds(int64(2 * loadTimeout / time.Millisecond)).Build()
		for _, r := range s.client.DoMulti(ctx, cmd.Build(), ttl) {
			if err := r.Error(); err != nil {
				return err
			}
		}
	}
	return nil
}

// streamPersisted returns the ids of the orders in the voucher's stream
// that the snapshot holds already (persisted, not acknowledged yet; live
// or closed since), for load.lua to pass over.
func (s *Service) streamPersisted(ctx context.Context, vk layout.VoucherKeys, persisted map[string]bool) []string {
	entries, err := s.client.Do(ctx, s.client.B().Xrange().Key(vk.Orders).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		return nil // counted as not persisted: fewer units sold, never twice
	}
	var ids []string
	for _, e := range entries {
		for _, id := range layout.EntryOrderIDs(e.FieldValues) {
			if persisted[id] {
				ids = append(ids, id)
			}
		}
	}
	return ids
}
