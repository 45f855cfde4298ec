package async

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// Gate results, as gate.lua returns them.
const (
	gateAccepted = iota
	gateNotLoaded
	gateNotStarted
	gateEnded
	gateSoldOut
	gateDuplicate
)

// PlaceOrder takes one order of the voucher for the user through the Redis
// gate. It returns the order with status pending, or ENotFound,
// ENotStarted (with a RetryAfter), EEnded, ESoldOut or EDuplicateOrder, or
// EUnavailable when Redis does not answer. A voucher missing from Redis is
// reloaded from MySQL, then the order is tried once more. Refusals for a
// voucher that is sold out, ended or not started are remembered for
// VerdictTTL and answered without Redis.
func (s *Service) PlaceOrder(ctx context.Context, voucherID, userID int64) (*flashsale.Order, error) {
	if voucherID <= 0 {
		return nil, flashsale.Errorf(flashsale.ENotFound, "voucher %d not found", voucherID)
	}
	if userID <= 0 {
		return nil, flashsale.Errorf(flashsale.EInvalid, "user id must be positive")
	}
	l, kept := s.local(voucherID)
	if err := l.refusal(); err != nil {
		return nil, err
	}
	if !kept {
		if err := s.shardLocal(ctx, l, voucherID); err != nil {
			return nil, err
		}
	}
	id, err := s.cfg.OrderIDs.NextID(ctx)
	if err != nil {
		return nil, unavailable("order id", err)
	}
	o, err := s.askGate(ctx, l, voucherID, userID, id)
	if errors.Is(err, ErrNotLoaded) {
		l.forgetLevel()
		if err := s.Reload(ctx, voucherID); err != nil {
			return nil, err
		}
		o, err = s.askGate(ctx, l, voucherID, userID, id)
		if errors.Is(err, ErrNotLoaded) {
			return nil, unavailable(fmt.Sprintf("voucher %d", voucherID), err)
		}
	}
	if !kept && !errors.Is(err, ErrNotLoaded) && flashsale.ErrorCode(err) != flashsale.EUnavailable {
		s.keep(voucherID, l)
	}
	return o, err
}

// askGate has the gate decide one order, in the voucher's next batch
// (gatebatch.go), and returns its decision decoded.
func (s *Service) askGate(ctx context.Context, l *local, voucherID, userID, orderID int64) (*flashsale.Order, error) {
	if l.shards != nil {
		return s.askShards(ctx, l, voucherID, userID, orderID)
	}
	c := &gateCall{ctx: ctx, args: []string{strconv.FormatInt(userID, 10), strconv.FormatInt(orderID, 10)}, level: &l.levels[0]}
	if err := s.gate(voucherID, l.gateKeys, c); err != nil {
		// The gate may have run and accepted the order, its reply lost:
		// then no pointer is written, and the order the buyer's retry is
		// refused with is found by id only once it is persisted.
		return nil, unavailable("gate", err)
	}
	o, err := s.decodeGateReply(l, c.reply, voucherID, userID, orderID, 0, c.seen)
	if !c.durable && (err == nil || flashsale.ErrorCode(err) == flashsale.EDuplicateOrder) {
		// Neither accepted nor refused: the order it names may vanish.
		return nil, notDurable(orderNotDurable)
	}
	return o, err
}

// decodeGateReply turns the gate's reply, from the shard (0 for a voucher
// with one), into an order or an error, and remembers refusals in l (and,
// for an accepted order, writes its pointer and checks its level against
// seen, the shard's lowest level seen before the request).
func (s *Service) decodeGateReply(l *local, res []rueidis.RedisMessage, voucherID, userID, orderID int64, shard int, seen *levelMark) (*flashsale.Order, error) {
	code, err := res[0].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("async: gate answered %v: %w", res, err)
	}
	switch code {
	case gateAccepted:
		l.accepted.Add(1)
		left, _ := res[1].AsInt64()
		entry, _ := res[2].ToString()
		if len(res) > 5 {
			given, _ := res[3].AsInt64()
			initial, _ := res[4].AsInt64()
			loaded, _ := res[5].AsInt64()
			s.observeLevel(l, voucherID, shard, seen, loaded, level(left, initial, given))
		}
		if left == 0 && l.shards == nil { // a dry shard is refilled from the others
			l.remember(flashsale.ESoldOut, s.cfg.VerdictTTL, 0)
		}
		o := &flashsale.Order{ID: orderID, VoucherID: voucherID, UserID: userID, Status: flashsale.StatusPending, CreatedAt: layout.EntryTime(entry)}
		s.writePointer(o)
		return o, nil
	case gateNotLoaded:
		return nil, fmt.Errorf("%w: voucher %d", ErrNotLoaded, voucherID)
	case gateNotStarted:
		wait, _ := res[1].AsInt64()
		start := time.Duration(wait) * time.Microsecond
		l.remember(flashsale.ENotStarted, min(start, s.cfg.VerdictTTL), start)
		return nil, refusal(flashsale.ENotStarted, start)
	case gateEnded:
		l.remember(flashsale.EEnded, s.cfg.VerdictTTL, 0)
		return nil, refusal(flashsale.EEnded, 0)
	case gateSoldOut:
		l.remember(flashsale.ESoldOut, s.cfg.VerdictTTL, 0)
		return nil, refusal(flashsale.ESoldOut, 0)
	case gateDuplicate:
		prev, _ := res[1].ToString()
		return nil, flashsale.Errorf(flashsale.EDuplicateOrder, "you already have order %s for this voucher", prev)
	}
	return nil, fmt.Errorf("async: gate answered unknown code %d", code)
}

// FindOrder returns the order with the given id: from MySQL once the
// consumer has persisted it; before that, from Redis with status pending
// (or failed, when it was dead-lettered or its stock given back); or
// ENotFound.
func (s *Service) FindOrder(ctx context.Context, id int64) (*flashsale.Order, error) {
	o, err := s.db.FindOrder(ctx, id)
	if flashsale.ErrorCode(err) != flashsale.ENotFound {
		return o, err
	}
	voucher, user, err := s.findPointer(ctx, id)
	if err != nil {
		return nil, err
	}
	vk := s.buyerKeys(ctx, voucher, user)
	pending, err := lookupScript.Exec(ctx, s.client, []string{vk.Buyers, vk.Failed},
		[]string{strconv.FormatInt(user, 10), strconv.FormatInt(id, 10)}).AsInt64()
	if err != nil {
		return nil, unavailable(fmt.Sprintf("find order %d", id), err)
	}
	if s.cfg.Durability.Mode == DurabilityReplica {
		if err := s.confirmReplicated(ctx, voucher); err != nil {
			return nil, err
		}
	}
	status := flashsale.StatusFailed
	if pending == 1 {
		status = flashsale.StatusPending
	}
	return &flashsale.Order{ID: id, VoucherID: voucher, UserID: user, Status: status}, nil
}

// parsePointer reads an order pointer, "<voucher>:<user>".
func parsePointer(val string) (voucher, user int64, err error) {
	v, u, ok := strings.Cut(val, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not voucher:user", val)
	}
	if voucher, err = strconv.ParseInt(v, 10, 64); err != nil {
		return 0, 0, err
	}
	if user, err = strconv.ParseInt(u, 10, 64); err != nil {
		return 0, 0, err
	}
	return voucher, user, nil
}
