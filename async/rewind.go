package async

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"
)

// A failover to a replica that had not received the last writes takes
// Redis back in time: the epoch is the same (it was replicated long ago),
// but the orders accepted after the replica's last write are gone, their
// units are for sale again, and their buyers may buy again. An instance
// notices it by a voucher's level, stock - given (given counts the units
// reconciliation gave back, restore.lua): every accepted order lowers it
// by one and nothing raises it while Redis keeps its writes. An instance
// remembers the lowest level the gate reported (local.low); a reply to a
// request sent after that one, whose level is not below it, comes from a
// Redis that lost at least (level + 1 - low) units' worth of writes:
// accepted orders, or buyers a consumer recorded. Only replies to requests
// sent after the low was seen are compared, so replies that cross on the
// wire never look like a rewind.

// lowUnknown is local.low before the instance has seen a level.
const lowUnknown = math.MaxInt64

// rewindTimeout bounds the recording and repair of a rewind, which runs
// off the request path.
const rewindTimeout = 30 * time.Second

// level returns the voucher's level in an accepted gate reply.
func level(left, given int64) int64 { return left - given }

// observeLevel records the level of an accepted order whose request was
// sent when the lowest level the instance had seen was seen, and reports
// a rewind when the level is not below it.
func (s *Service) observeLevel(l *local, voucherID, seen, lvl int64) {
	// Of the replies that see one rewind, the first to move the low to its
	// own level reports it; Redis's history goes on from there.
	if seen != lowUnknown && lvl >= seen && l.low.CompareAndSwap(seen, lvl) {
		s.reportRewind(voucherID, lvl+1-seen, seen, lvl)
		return
	}
	for {
		cur := l.low.Load()
		if lvl >= cur || l.low.CompareAndSwap(cur, lvl) {
			return
		}
	}
}

// forgetLevel makes the instance forget a voucher's level: the voucher is
// (re)loaded from MySQL, which starts a new history.
func (l *local) forgetLevel() { l.low.Store(lowUnknown) }

// reportRewind logs a rewind loudly, then, off the request path, records
// it in the epochs stream for reconcile and repairs what MySQL knows.
func (s *Service) reportRewind(voucherID, atLeast, seen, lvl int64) {
	s.log.Error("REDIS LOST ACCEPTED ORDERS: Redis went back in time (a failover to a replica that lagged?); "+
		"orders of this voucher accepted before it are gone from Redis, their units are for sale again; run flashsale reconcile",
		"voucher", voucherID, "at_least", atLeast, "level_seen", seen, "level_now", lvl)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), rewindTimeout)
		defer cancel()
		s.recordRewind(ctx, voucherID, atLeast)
		if n, err := s.recordPersistedBuyers(ctx, voucherID); err != nil {
			s.log.Error("async: recording MySQL's buyers after Redis went back in time; run flashsale reconcile", "voucher", voucherID, "err", err)
		} else if n > 0 {
			s.log.Warn("async: Redis went back in time: recorded buyers MySQL holds that Redis had lost, a unit each",
				"voucher", voucherID, "buyers", n)
		}
	}()
}

// recordRewind adds the rewind to the epochs stream, which reconcile
// prints (ReadEpochs).
func (s *Service) recordRewind(ctx context.Context, voucherID, atLeast int64) {
	s.epoch.mu.Lock()
	cur := s.epoch.current
	s.epoch.mu.Unlock()
	cmd := s.client.B().Xadd().Key(s.keys.epochs()).Maxlen().Almost().Threshold("1000").Id("*").FieldValue().
		FieldValue("kind", LossRewound).
		FieldValue("noticed", strconv.FormatInt(time.Now().UnixMilli(), 10)).
		FieldValue("previous", cur).FieldValue("epoch", cur).FieldValue("by", defaultName()).
		FieldValue("at_least", strconv.FormatInt(atLeast, 10)).
		FieldValue("vouchers", fmt.Sprintf("%d:%d", voucherID, atLeast)).Build()
	if err := s.client.Do(ctx, cmd).Error(); err != nil {
		s.log.Error("async: recording that Redis went back in time, for reconcile", "voucher", voucherID, "err", err)
	}
}

// recordPersistedBuyers makes Redis record the buyer of every order MySQL
// holds for the voucher, taking a unit of stock for each buyer it did not
// know (ack.lua, with no entries to acknowledge). A rewind may have taken
// orders the consumers had persisted: without this their units would be
// sold again (MySQL would refuse those orders: stock_short dead letters)
// and their buyers could buy twice. Orders Redis still knows are left
// alone, so running it twice, or beside the consumers, does no harm. It
// returns how many buyers it recorded.
func (s *Service) recordPersistedBuyers(ctx context.Context, voucherID int64) (int64, error) {
	_, orders, err := s.db.VoucherSnapshot(ctx, voucherID)
	if err != nil {
		return 0, err
	}
	vk := s.keys.voucher(voucherID)
	var recorded int64
	for start := 0; start < len(orders); start += buyersChunk {
		args := []string{s.cfg.Group, "0"}
		for _, o := range orders[start:min(start+buyersChunk, len(orders))] {
			args = append(args, strconv.FormatInt(o.UserID, 10), strconv.FormatInt(o.ID, 10))
		}
		v, err := ackScript.Exec(ctx, s.client, []string{vk.orders, vk.meta, vk.buyers}, args).AsIntSlice()
		if err != nil {
			return recorded, err
		}
		recorded += v[2]
	}
	return recorded, nil
}
