package async

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// PlaceOrder takes an order through the Redis gate: pending, or ENotFound,
// ENotStarted (with a RetryAfter), EEnded, ESoldOut, EDuplicateOrder,
// ELimitReached or EInvalid (a quantity above the limit), EBusy (with a
// RetryAfter) when Config.MaxPending orders are on their way already, or
// EUnavailable when Redis does not answer. A request whose idempotency key placed an
// order already gets that order. A voucher missing from Redis is reloaded
// from MySQL, then the order is tried once more. Refusals for a voucher
// that is sold out, ended or not started are remembered for
// Config.VerdictTTL and answered without Redis (not to a request with an
// idempotency key); a sell-out is forgotten at once when a return of the
// voucher is announced (WatchReturns).
func (s *Service) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	switch {
	case req.VoucherID <= 0:
		return nil, flashsale.Errorf(flashsale.ENotFound, "voucher %d not found", req.VoucherID)
	case req.UserID <= 0:
		return nil, flashsale.Errorf(flashsale.EInvalid, "user id must be positive")
	case req.Quantity < 0 || req.Quantity > flashsale.MaxLimitPerBuyer:
		return nil, flashsale.Errorf(flashsale.EInvalid, "quantity must be 1 to the voucher's limit per buyer")
	}
	l, kept := s.local(req.VoucherID)
	if req.IdempotencyKey == "" { // a keyed request's first answer may not be a refusal
		if err := l.refusal(); err != nil {
			return nil, err
		}
	}
	if s.pending.Add(1) > int64(s.cfg.MaxPending) {
		s.pending.Add(-1)
		return nil, busy()
	}
	defer s.pending.Add(-1)
	if !kept {
		if err := s.shardLocal(ctx, l, req.VoucherID); err != nil {
			return nil, err
		}
	}
	id, err := s.orderID(ctx, l, req)
	if err != nil {
		return nil, unavailable("order id", err)
	}
	o, err := s.askGate(ctx, l, req, id)
	if errors.Is(err, ErrNotLoaded) {
		l.forgetLevel()
		if err := s.Reload(ctx, req.VoucherID); err != nil {
			return nil, err
		}
		o, err = s.askGate(ctx, l, req, id)
		if errors.Is(err, ErrNotLoaded) {
			return nil, unavailable(fmt.Sprintf("voucher %d", req.VoucherID), err)
		}
	}
	if !kept && !errors.Is(err, ErrNotLoaded) && flashsale.ErrorCode(err) != flashsale.EUnavailable {
		s.keep(req.VoucherID, l)
	}
	return o, err
}

// defaultMaxPending is Config.MaxPending's default: about 70 ms of orders
// for a Redis core deciding 30k a second.
const defaultMaxPending = 2048

// defaultMaxGateWait is Config.MaxGateWait's default: 40 of the 100 ms an
// answer may take under overload for the wait the gate expects (the
// calls ahead and the order's own); the rest for calls slower than
// expected and the rest of the request. With 50, a Redis held to a tenth
// of a core answered at a p99 of 128-163 ms; with 40, 98.5-99 ms, and a
// quarter of a core kept its orders per second within noise
// (BenchmarkOverloadedRedis, docs/benchmarks.md, i34o).
const defaultMaxGateWait = 40 * time.Millisecond

// busy answers an order over Config.MaxPending or Config.MaxGateWait.
func busy() error {
	return &flashsale.Error{Code: flashsale.EBusy, Message: "too many orders on their way; try again", RetryAfter: time.Second}
}

// SlotIDGenerator is an IDGenerator whose IDs carry a Redis Cluster
// slot, as idgen.Slots': an order's id carries the slot of its shard, so
// its pointer and its id's range are written on the shard's master
// (layout.Pointer).
type SlotIDGenerator interface {
	flashsale.IDGenerator
	NextIDIn(ctx context.Context, slot int) (int64, error)
}

// orderID returns a new id for an order of req, in the slot of the
// buyer's shard.
func (s *Service) orderID(ctx context.Context, l *local, req flashsale.OrderRequest) (int64, error) {
	if l.shards != nil {
		return s.cfg.OrderIDs.NextIDIn(ctx, l.shards[layout.HomeShard(req.UserID, len(l.shards))].Slot)
	}
	return s.cfg.OrderIDs.NextIDIn(ctx, l.slot)
}

// gateArgs returns the gate's ARGV for one order.
func orderArgs(req flashsale.OrderRequest, orderID int64) []string {
	return []string{strconv.FormatInt(req.UserID, 10), strconv.FormatInt(orderID, 10), strconv.Itoa(req.Units()), req.IdempotencyKey}
}

// askGate has the gate decide one order, in the voucher's next batch
// (gatebatch.go), and returns its decision decoded.
func (s *Service) askGate(ctx context.Context, l *local, req flashsale.OrderRequest, orderID int64) (*flashsale.Order, error) {
	if l.shards != nil {
		return s.askShards(ctx, l, req, orderID)
	}
	c := &gateCall{ctx: ctx, args: orderArgs(req, orderID), level: &l.levels[0]}
	notices := l.notices.Load()
	if err := s.gate(req.VoucherID, l.gateKeys, 1, c); err != nil {
		if err == errGateBusy {
			return nil, busy()
		}
		// The gate may have run and accepted the order, its reply lost:
		// its pointer was written in the same script, so the buyer's
		// retry is refused with an order that GET finds by id.
		return nil, unavailable("gate", err)
	}
	o, err := s.decodeGateReply(ctx, l, c.reply, req, orderID, 0, c.seen, notices)
	if !c.durable && (err == nil || flashsale.ErrorCode(err) == flashsale.EDuplicateOrder) {
		// Neither accepted nor refused: the order it names may vanish.
		return nil, notDurable(orderNotDurable)
	}
	return o, err
}

// decodeGateReply turns the gate's reply, from the shard (0 for a voucher
// with one), into an order or an error, and remembers refusals in l (and,
// for an accepted order, checks its level against seen, the shard's
// lowest level seen before the request). A sell-out is remembered only if
// no return notice came since the call was sent (l's count of them was
// notices then): the reply may predate the return.
func (s *Service) decodeGateReply(ctx context.Context, l *local, r *gateReply, req flashsale.OrderRequest, orderID int64, shard int, seen *levelMark, notices int64) (*flashsale.Order, error) {
	switch r.code {
	case gateAccepted:
		return s.accepted(l, r, req, orderID, shard, seen, notices), nil
	case gateNotLoaded:
		return nil, fmt.Errorf("%w: voucher %d", ErrNotLoaded, req.VoucherID)
	case gateNotStarted:
		start := time.Duration(r.n) * time.Microsecond
		l.remember(flashsale.ENotStarted, min(start, s.cfg.VerdictTTL), start)
		return nil, refusal(flashsale.ENotStarted, start)
	case gateEnded:
		l.remember(flashsale.EEnded, s.cfg.VerdictTTL, 0)
		return nil, refusal(flashsale.EEnded, 0)
	case gateSoldOut:
		if req.Units() == 1 { // an order of more units says nothing of one
			l.rememberSoldOut(s.cfg.VerdictTTL, notices)
		}
		return nil, refusal(flashsale.ESoldOut, 0)
	case gateDuplicate:
		return nil, flashsale.Errorf(flashsale.EDuplicateOrder, "you already have order %s for this voucher", r.order)
	case gateLimitReached:
		return nil, flashsale.Errorf(flashsale.ELimitReached, "your orders of this voucher hold %d units; this order would pass the limit per buyer", r.n)
	case gateKeyPlaced:
		return s.keyPlaced(ctx, r, req)
	case gateBadQuantity:
		return nil, flashsale.Errorf(flashsale.EInvalid, "quantity must be 1 to %d, the voucher's limit per buyer", r.n)
	}
	return nil, fmt.Errorf("async: gate answered unknown code %d", r.code)
}

// accepted returns the order the gate accepted (and pointed to), after
// checking the shard's level.
func (s *Service) accepted(l *local, r *gateReply, req flashsale.OrderRequest, orderID int64, shard int, seen *levelMark, notices int64) *flashsale.Order {
	l.accepted.Add(1)
	h := r.head
	s.observeLevel(l, req.VoucherID, shard, seen, h.loaded, level(r.left, h.initial, h.given, h.returned))
	if r.left == 0 && l.shards == nil { // a dry shard is refilled from the others
		l.rememberSoldOut(s.cfg.VerdictTTL, notices)
	}
	o := &flashsale.Order{ID: orderID, VoucherID: req.VoucherID, UserID: req.UserID, Quantity: req.Units(), Status: flashsale.StatusPending,
		IdempotencyKey: req.IdempotencyKey, CreatedAt: layout.EntryTime(r.entry)}
	if h.payBy > 0 {
		o.PayBy = time.UnixMicro(h.payBy).UTC()
	}
	return o
}

// keyPlaced answers a request whose idempotency key placed an order
// already with that order, as it stands now.
func (s *Service) keyPlaced(ctx context.Context, r *gateReply, req flashsale.OrderRequest) (*flashsale.Order, error) {
	o, err := s.db.FindOrder(ctx, r.n)
	if flashsale.ErrorCode(err) == flashsale.ENotFound {
		o, err = s.pendingAt(ctx, r.n, pointer{req.VoucherID, req.UserID, r.entry})
	}
	if err != nil {
		return nil, fmt.Errorf("async: the order placed with key %q: %w", req.IdempotencyKey, err)
	}
	return o, nil
}

// FindOrder returns the order with the given id: from MySQL once the
// consumer has persisted it; before that, from Redis with status pending
// (or failed, when it was dead-lettered or Redis lost it); or ENotFound.
func (s *Service) FindOrder(ctx context.Context, id int64) (*flashsale.Order, error) {
	o, err := s.db.FindOrder(ctx, id)
	if flashsale.ErrorCode(err) != flashsale.ENotFound {
		return o, err
	}
	o, err = s.findPending(ctx, id)
	if err != nil || o.Status != flashsale.StatusFailed {
		return o, err
	}
	// The entry left the stream: persisted meanwhile, or lost.
	if persisted, err := s.db.FindOrder(ctx, id); flashsale.ErrorCode(err) != flashsale.ENotFound {
		return persisted, err
	}
	return o, nil
}

// findPending returns an accepted order that is not in MySQL from its
// stream entry: pending while the entry waits in the stream, failed when
// it was dead-lettered or is gone. ENotFound when Redis has no pointer to
// it.
func (s *Service) findPending(ctx context.Context, id int64) (*flashsale.Order, error) {
	p, err := s.findPointer(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.pendingAt(ctx, id, p)
}

// pendingAt is findPending for the order at pointer p.
func (s *Service) pendingAt(ctx context.Context, id int64, p pointer) (*flashsale.Order, error) {
	vk := s.buyerKeys(ctx, p.voucher, p.user)
	fields, err := lookupScript.Exec(ctx, s.client, []string{vk.Orders, vk.Failed},
		[]string{strconv.FormatInt(p.user, 10), strconv.FormatInt(id, 10), p.entry}).AsStrMap()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, unavailable(fmt.Sprintf("find order %d", id), err)
	}
	if s.cfg.Durability.Mode == DurabilityReplica {
		if err := s.confirmReplicated(ctx, p.voucher); err != nil {
			return nil, err
		}
	}
	if len(fields) == 0 {
		return &flashsale.Order{ID: id, VoucherID: p.voucher, UserID: p.user, Quantity: 1, Status: flashsale.StatusFailed}, nil
	}
	orders, bad := layout.ParseEntry(p.voucher, p.entry, fields)
	if len(bad) > 0 {
		return nil, fmt.Errorf("async: entry of order %d: %w", id, bad[0].Err)
	}
	if len(orders) != 1 || orders[0].ID != id {
		return nil, fmt.Errorf("async: entry %s does not hold order %d: %w", p.entry, id, layout.ErrMalformed)
	}
	o := orders[0]
	o.Status = flashsale.StatusPending
	return &o, nil
}
