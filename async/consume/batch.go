package consume

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

// item is a stream entry read as an order.
type item struct {
	entry      string // stream entry id
	order      flashsale.Order
	deliveries int64 // 0 when not known
}

// handle persists a batch of entries and acknowledges them; an entry
// delivered more than MaxDeliveries times (deliveries, parallel to
// entries, or nil when this process read them new) is persisted on its
// own after the batch, and dead-lettered only if that fails for good or
// MaxDeliveries attempts on its own never finished. It returns an error
// only when entries are left pending (ctx done, Redis failed, or the
// replicas do not have them: ErrNotReplicated).
func (w *worker) handle(ctx context.Context, entries []rueidis.XRangeEntry, deliveries []int64) error {
	// Alone, an order that crashes its consumer does not take its batch
	// with it; the count of attempts alone is kept in Redis, so a crash
	// blames the entry being persisted, not those waiting behind it, and
	// deliveries that add up while MySQL is down and consumers restart do
	// not give an accepted order up.
	if len(entries) == 0 {
		return nil
	}
	if err := w.replicated(ctx); err != nil {
		return err
	}
	var batch, alone []item
	var ack []string
	for i, e := range entries {
		it := item{entry: e.ID}
		if deliveries != nil {
			it.deliveries = deliveries[i]
		}
		if e.FieldValues == nil {
			w.lostEntry(e.ID)
			ack = append(ack, e.ID)
			continue
		}
		o, err := parseOrder(w.voucher, e)
		switch {
		case err != nil:
			err = w.deadLetter(ctx, it, e.FieldValues[layout.FieldOrder], e.FieldValues[layout.FieldUser], layout.DeadMalformed, err.Error())
		case it.deliveries > w.c.cfg.MaxDeliveries:
			it.order = o
			alone = append(alone, it)
		default:
			it.order = o
			batch = append(batch, it)
		}
		if err != nil {
			return err
		}
	}
	w.held = append(batch, alone...) // touched while MySQL is retried
	defer func() { w.held = nil }()
	persisted, err := w.persist(ctx, batch)
	if err != nil {
		return err
	}
	if err := w.ack(ctx, ack, persisted); err != nil {
		return err
	}
	for _, it := range alone {
		if err := w.persistAlone(ctx, it); err != nil {
			return err
		}
	}
	return nil
}

// persistAlone persists an over-delivered entry on its own, or
// dead-letters it if attempts on its own keep dying (see handle).
func (w *worker) persistAlone(ctx context.Context, it item) error {
	cmd := w.c.client.B().Hincrby().Key(w.keys.Tries).Field(it.entry).Increment(1).Build()
	tries, err := w.c.client.Do(ctx, cmd).AsInt64()
	if err != nil {
		return err
	}
	if tries > w.c.cfg.MaxDeliveries {
		reason := fmt.Sprintf("delivered %d times; %d attempts to persist it on its own did not finish", it.deliveries, tries-1)
		err = w.deadLetter(ctx, it, "", "", layout.DeadPoison, reason)
	} else {
		var persisted []item
		if persisted, err = w.persist(ctx, []item{it}); err == nil {
			err = w.ack(ctx, nil, persisted)
		}
	}
	if err != nil {
		// A stop or an outage is not a death: only attempts that never
		// return (the process died in them) may count against the entry.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = w.c.client.Do(dctx, w.c.client.B().Hincrby().Key(w.keys.Tries).Field(it.entry).Increment(-1).Build()).Error()
		return err
	}
	// Settled: acknowledged or dead-lettered. A count left behind by a
	// failure here is harmless (entry ids are never reused).
	return w.c.client.Do(ctx, w.c.client.B().Hdel().Key(w.keys.Tries).Field(it.entry).Build()).Error()
}

// persist writes items to MySQL and returns those in MySQL now, to
// acknowledge. On a stock shortage it splits the batch to find the orders
// that fit; an order that does not, or that conflicts with another order
// of its user, is dead-lettered. MySQL errors are retried until ctx is
// done.
func (w *worker) persist(ctx context.Context, items []item) ([]item, error) {
	if len(items) == 0 {
		return nil, nil
	}
	res, err := w.persistRetry(ctx, items)
	if errors.Is(err, flashsale.ErrStockShort) {
		if len(items) == 1 {
			return nil, w.deadLetter(ctx, items[0], "", "", layout.DeadStockShort, err.Error())
		}
		half := len(items) / 2
		first, err := w.persist(ctx, items[:half])
		if err != nil {
			return nil, err
		}
		second, err := w.persist(ctx, items[half:])
		return append(first, second...), err
	}
	if err != nil {
		return nil, err
	}
	if len(res.Outcomes) != len(items) {
		return nil, fmt.Errorf("async: persisting %d orders returned %d outcomes", len(items), len(res.Outcomes))
	}
	w.c.batches.Add(1)
	w.c.persisted.Add(uint64(res.Inserted))
	w.c.alreadyPresent.Add(uint64(res.AlreadyPresent))
	persisted := make([]item, 0, len(items))
	for i, out := range res.Outcomes {
		kind, reason := layout.DeadConflict, "conflict: the user has another order for this voucher"
		if out == flashsale.OutcomeKeyConflict {
			kind, reason = layout.DeadKeyConflict, "conflict: another order of the user holds its idempotency key"
		}
		if out == flashsale.OutcomeConflict || out == flashsale.OutcomeKeyConflict {
			if err := w.deadLetter(ctx, items[i], "", "", kind, reason); err != nil {
				return nil, err
			}
			continue
		}
		persisted = append(persisted, items[i])
	}
	return persisted, nil
}

// persistRetry persists items in one transaction, retrying MySQL errors
// with exponential backoff while it keeps the batch: an outage makes the
// entries wait, it does not count as a delivery. While retrying it touches
// every entry handle holds (those waiting to be persisted on their own
// too), so other consumers do not take them over.
func (w *worker) persistRetry(ctx context.Context, items []item) (flashsale.PersistResult, error) {
	orders := make([]flashsale.Order, len(items))
	for i, it := range items {
		orders[i] = it.order
	}
	wait := w.c.cfg.RetryMin
	touched := time.Now()
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, w.c.cfg.PersistTimeout)
		res, err := w.c.db.PersistOrders(actx, orders)
		cancel()
		if err == nil || errors.Is(err, flashsale.ErrStockShort) || errors.Is(err, flashsale.ErrUnknownVoucher) {
			return res, err // the batch's to answer, not an outage's
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		w.c.retries.Add(1)
		if attempt == 1 || attempt%10 == 0 {
			w.log.Warn("async: persisting a batch failed; retrying, the entries wait in the stream",
				"orders", len(orders), "attempt", attempt, "err", err)
		}
		if err := sleep(ctx, wait); err != nil {
			return res, err
		}
		wait = min(2*wait, w.c.cfg.RetryMax)
		if time.Since(touched) >= w.c.cfg.ClaimIdle/3 && len(w.held) > 0 {
			w.touch(ctx, w.held)
			touched = time.Now()
		}
	}
}

// touch resets the idle time of entries this consumer holds, without
// counting a delivery (XCLAIM JUSTID), so ClaimIdle does not expire while
// it waits for MySQL.
func (w *worker) touch(ctx context.Context, items []item) {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.entry
	}
	cmd := w.c.client.B().Xclaim().Key(w.keys.Orders).Group(w.c.cfg.Group).Consumer(w.c.cfg.Name).
		MinIdleTime("0").Id(ids...).Justid().Build()
	if err := w.c.client.Do(ctx, cmd).Error(); err != nil {
		w.log.Warn("async: could not touch the entries being retried; another consumer may take them over", "err", err)
	}
}

// ack acknowledges the entries ids (lost from the stream) and persisted,
// and trims the stream (ack.lua). It trims even when there is nothing to
// acknowledge. It also records every persisted order's buyer in Redis if
// Redis does not know it (see ack.lua). Its time sizes the next reads
// (pace.go).
func (w *worker) ack(ctx context.Context, ids []string, persisted []item) error {
	entries := make([]string, 0, len(ids)+len(persisted))
	entries = append(entries, ids...)
	orders := make([]flashsale.Order, len(persisted))
	for i, it := range persisted {
		entries = append(entries, it.entry)
		orders[i] = it.order
	}
	start := time.Now()
	if _, err := layout.Ack(ctx, w.c.client, w.keys, w.c.cfg.Group, entries, orders); err != nil {
		return err
	}
	if len(entries) > 1 { // one entry's quick ack says nothing of a read's
		w.paced(time.Since(start))
	}
	return nil
}

// deadLetter moves an entry to the dead-letter stream with its kind and
// reason and reports it. order and user default to the item's order.
func (w *worker) deadLetter(ctx context.Context, it item, order, user string, kind layout.DeadKind, reason string) error {
	if order == "" && it.order.ID != 0 {
		order = strconv.FormatInt(it.order.ID, 10)
	}
	if user == "" && it.order.UserID != 0 {
		user = strconv.FormatInt(it.order.UserID, 10)
	}
	keys := []string{w.keys.Orders, w.keys.Dead, w.keys.Failed}
	args := []string{w.c.cfg.Group, it.entry, order, user, reason, strconv.FormatInt(it.deliveries, 10), string(kind), strconv.Itoa(it.order.Units())}
	moved, err := deadScript.Exec(ctx, w.c.client, keys, args).AsInt64()
	if err != nil {
		return err
	}
	if moved == 1 {
		w.c.deadLettered.Add(1)
		w.log.Error("async: order dead-lettered: it will not be persisted; reconciliation gives its stock back unless MySQL had none for it",
			"entry", it.entry, "order", order, "user", user, "kind", kind, "reason", reason, "deliveries", it.deliveries)
	}
	return nil
}

// parseOrder reads a stream entry as a new order.
func parseOrder(voucherID int64, e rueidis.XRangeEntry) (flashsale.Order, error) {
	o, err := layout.ParseOrder(voucherID, e.ID, e.FieldValues)
	o.Status = flashsale.StatusPending
	return o, err
}
