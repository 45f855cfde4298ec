package async

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// A failover to a replica that had not received the last writes takes
// Redis back in time: the epoch is the same (it was replicated long ago),
// but the orders accepted after the replica's last write are gone, their
// units are for sale again, and their buyers may buy again. An instance
// notices it by the level of a voucher's keys (of each shard's keys, for
// a sharded voucher), stock - initial - given - returned: every accepted
// order lowers it by its quantity, and nothing raises it while Redis keeps
// its writes. A restore (restore.lua) adds one to stock and to given; a
// return (async/returns) adds the same units to stock and returned; a move between
// shards (take.lua, give.lua, whoever completes it) changes stock and
// initial by the same units; a consumer recording a buyer Redis did not
// know (ack.lua) takes a unit or nothing. A load from MySQL (load.lua)
// starts a new history, stamped in the meta hash's loaded field, which
// the gate reports with the level.
//
// An instance remembers, per shard, the lowest level the gate reported in
// the current history (local.levels); a reply to a request sent after
// that one, from the same history, whose level is not below it, comes
// from a Redis that lost at least (level + 1 - low) units' worth of
// writes: accepted orders, or buyers a consumer recorded. Only replies to
// requests sent after the low was seen are compared, so replies that
// cross on the wire never look like a rewind.

// rewindTimeout bounds the recording and repair of a rewind, which runs
// off the request path.
const rewindTimeout = 30 * time.Second

// levelMark is the lowest level the gate reported for one shard (the
// voucher's keys when it has one) in the history loaded at loaded.
type levelMark struct{ loaded, low int64 }

// level returns the level in an accepted gate reply.
func level(left, initial, given, returned int64) int64 { return left - initial - given - returned }

// newLevels returns the level marks of a voucher of n shards, none seen.
func newLevels(n int) []atomic.Pointer[levelMark] { return make([]atomic.Pointer[levelMark], n) }

// observeLevel records the level of an accepted order on a shard of the
// voucher, from the history loaded at loaded, whose request was sent when
// seen was the shard's mark, and reports a rewind when the level is not
// below seen's in the same history.
func (s *Service) observeLevel(l *local, voucherID int64, shard int, seen *levelMark, loaded, lvl int64) {
	mark := &l.levels[shard]
	next := &levelMark{loaded: loaded, low: lvl}
	// Of the replies that see one rewind, the first to move the low to its
	// own level reports it; Redis's history goes on from there.
	if seen != nil && seen.loaded == loaded && lvl >= seen.low && mark.CompareAndSwap(seen, next) {
		s.reportRewind(l, voucherID, shard, lvl+1-seen.low, seen.low, lvl)
		return
	}
	for {
		// Another history replaces the mark: a reload from MySQL, or a
		// reply to a request sent before it, which no request sent after
		// this one compares with a reply of the new history.
		cur := mark.Load()
		if cur != nil && cur.loaded == loaded && lvl >= cur.low || mark.CompareAndSwap(cur, next) {
			return
		}
	}
}

// forgetLevel makes the instance forget a voucher's levels: the voucher is
// (re)loaded from MySQL, which starts a new history.
func (l *local) forgetLevel() {
	for i := range l.levels {
		l.levels[i].Store(nil)
	}
}

// reportRewind logs a rewind seen on a shard of a voucher loudly, then,
// off the request path, records it in the epochs stream for reconcile and
// repairs what MySQL knows of the shard.
func (s *Service) reportRewind(l *local, voucherID int64, shard int, atLeast, seen, lvl int64) {
	shards := l.keysOf(s.keys, voucherID)
	attrs := []any{"voucher", voucherID, "at_least", atLeast, "level_seen", seen, "level_now", lvl}
	body := ""
	if len(shards) > 1 {
		body = shards[shard].Body
		attrs = append(attrs, "shard", body)
	}
	s.log.Error("REDIS LOST ACCEPTED ORDERS: Redis went back in time (a failover to a replica that lagged?); "+
		"orders of this voucher accepted before it are gone from Redis, their units are for sale again; run flashsale reconcile",
		attrs...)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), rewindTimeout)
		defer cancel()
		s.recordRewind(ctx, voucherID, body, atLeast)
		if n, err := s.recordPersistedBuyers(ctx, voucherID, shards, shard); err != nil {
			s.log.Error("async: recording MySQL's buyers after Redis went back in time; run flashsale reconcile", "voucher", voucherID, "shard", body, "err", err)
		} else if n > 0 {
			s.log.Warn("async: Redis went back in time: recorded buyers MySQL holds that Redis had lost, a unit each",
				"voucher", voucherID, "shard", body, "buyers", n)
		}
	}()
}

// recordRewind adds the rewind to the epochs stream, which reconcile
// prints (ReadEpochs); shard is the tag body of the shard it was seen on,
// "" for a voucher with one shard.
func (s *Service) recordRewind(ctx context.Context, voucherID int64, shard string, atLeast int64) {
	s.epoch.mu.Lock()
	cur := s.epoch.current
	s.epoch.mu.Unlock()
	loss := EpochLoss{Kind: LossRewound, Noticed: time.Now(), Previous: cur, Epoch: cur, By: layout.InstanceName(),
		AtLeast: atLeast, Vouchers: fmt.Sprintf("%d:%d", voucherID, atLeast), Shard: shard}
	if err := s.recordLoss(ctx, loss); err != nil {
		s.log.Error("async: recording that Redis went back in time, for reconcile", "voucher", voucherID, "err", err)
	}
}

// recordPersistedBuyers makes Redis record the buyer of every order MySQL
// holds for the voucher whose home is the shard (of shards, the voucher's
// keys), taking a unit of the shard's stock for each buyer it did not
// know (ack.lua, with no entries to acknowledge). A rewind may have taken
// orders the consumers had persisted: without this their units would be
// sold again (MySQL would refuse those orders: stock_short dead letters)
// and their buyers could buy twice. Orders Redis still knows are left
// alone, so running it twice, or beside the consumers, does no harm. It
// returns how many buyers it recorded.
func (s *Service) recordPersistedBuyers(ctx context.Context, voucherID int64, shards []layout.VoucherKeys, shard int) (int64, error) {
	_, all, err := s.db.VoucherSnapshot(ctx, voucherID)
	if err != nil {
		return 0, err
	}
	var orders []flashsale.Order
	for _, o := range all {
		if o.Status.Live() && layout.HomeShard(o.UserID, len(shards)) == shard {
			orders = append(orders, o)
		}
	}
	vk := shards[shard]
	var recorded int64
	for start := 0; start < len(orders); start += buyersChunk {
		res, err := layout.Ack(ctx, s.client, vk, s.cfg.Group, nil, orders[start:min(start+buyersChunk, len(orders))], false)
		if err != nil {
			return recorded, err
		}
		recorded += res.Recorded
	}
	return recorded, nil
}
