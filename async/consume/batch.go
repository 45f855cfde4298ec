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

// handle persists the orders of entries and acknowledges the entries; an
// entry delivered more than MaxDeliveries times (deliveries, parallel to
// entries, or nil when this process read them new) has its orders
// persisted one by one after the batch, each dead-lettered only if that
// fails for good or MaxDeliveries attempts on its own never finished. An
// entry is acknowledged once each of its orders is persisted or
// dead-lettered; of entries delivered before (reread), the orders
// dead-lettered then are passed over (settle.go). It returns an error
// only when entries are left pending (ctx done, Redis failed, or the
// replicas do not have them: ErrNotReplicated).
func (w *worker) handle(ctx context.Context, entries []rueidis.XRangeEntry, deliveries []int64, reread bool) error {
	// Alone, an order that crashes its consumer does not take its batch
	// with it; the count of attempts alone is kept in Redis, so a crash
	// blames the order being persisted, not those waiting behind it, and
	// deliveries that add up while MySQL is down and consumers restart do
	// not give an accepted order up.
	if len(entries) == 0 {
		return nil
	}
	if err := w.replicated(ctx); err != nil {
		return err
	}
	w.marks = nil
	var dead map[string]bool
	if reread {
		var err error
		if dead, err = w.deadMarked(ctx, entries); err != nil {
			return err
		}
	}
	batch, alone, acks, aloneAcks, err := w.split(ctx, entries, deliveries, dead)
	if err != nil {
		return err
	}
	w.held, w.touched = append(batch, alone...), time.Now() // touched while MySQL is slow
	defer func() { w.held = nil }()
	if err := w.persistChunks(ctx, batch, acks); err != nil {
		return err
	}
	if err := w.handleAlone(ctx, alone, aloneAcks); err != nil {
		return err
	}
	return w.clearMarks(ctx)
}

// split reads entries (deliveries as for handle) as the items to persist
// in one batch and those to persist alone, with the entries of each, in
// their order. It dead-letters the orders it cannot read, and passes over
// those dead-lettered before (the tries fields in dead).
func (w *worker) split(ctx context.Context, entries []rueidis.XRangeEntry, deliveries []int64, dead map[string]bool) (batch, alone []item, acks, aloneAcks []layout.AckEntry, err error) {
	orders := 0
	for i, e := range entries {
		var d int64
		if deliveries != nil {
			d = deliveries[i]
		}
		if e.FieldValues == nil {
			w.lostEntry(e.ID)
			acks = append(acks, layout.AckEntry{ID: e.ID})
			continue
		}
		parsed, bad := layout.ParseEntry(w.voucher, e.ID, e.FieldValues)
		for _, b := range bad {
			if dead[markField(e.ID, b.Order)] {
				w.marks = append(w.marks, markField(e.ID, b.Order))
			} else if err := w.deadLetter(ctx, item{entry: e.ID, deliveries: d}, b.Order, b.User, layout.DeadMalformed, b.Err.Error()); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		ack := layout.AckEntry{ID: e.ID, Orders: len(parsed) + len(bad)}
		orders += ack.Orders
		items := make([]item, 0, len(parsed))
		for _, o := range parsed {
			if f := markField(e.ID, strconv.FormatInt(o.ID, 10)); dead[f] {
				w.marks = append(w.marks, f)
				continue
			}
			o.Status = flashsale.StatusPending
			items = append(items, item{entry: e.ID, order: o, deliveries: d})
		}
		if d > w.c.cfg.MaxDeliveries {
			alone, aloneAcks = append(alone, items...), append(aloneAcks, ack)
		} else {
			batch, acks = append(batch, items...), append(acks, ack)
		}
	}
	w.learn(len(entries), orders)
	return batch, alone, acks, aloneAcks, nil
}

// persistChunks persists items in transactions of at most BatchSize
// orders (an entry holds a gate batch, so a read's orders are not known
// before it) and, after each, acknowledges the entries of acks it
// settled: acks are in the order of the items' entries, whose items are
// together. It acknowledges, and trims, at least once.
func (w *worker) persistChunks(ctx context.Context, items []item, acks []layout.AckEntry) error {
	start, done := 0, 0
	for {
		if time.Since(w.touched) >= w.c.cfg.ClaimIdle/3 { // a large read takes a while
			w.touch(ctx, w.held)
		}
		end := min(len(items), start+w.c.cfg.BatchSize)
		persisted, err := w.persist(ctx, items[start:end])
		if err != nil {
			return err
		}
		settled := done
		for settled < len(acks) && (end == len(items) || acks[settled].ID != items[end].entry) {
			settled++
		}
		if err := w.ack(ctx, acks[done:settled], persisted); err != nil {
			return err
		}
		if start, done = end, settled; start == len(items) {
			return nil
		}
	}
}

// handleAlone persists the orders of over-delivered entries one by one
// (items, in the order of acks) and acknowledges each entry once its
// orders are settled.
func (w *worker) handleAlone(ctx context.Context, items []item, acks []layout.AckEntry) error {
	for _, ack := range acks {
		var persisted []item
		for _, it := range items {
			if it.entry != ack.ID {
				continue
			}
			done, err := w.persistAlone(ctx, it)
			if err != nil {
				return err
			}
			persisted = append(persisted, done...)
		}
		if err := w.ack(ctx, []layout.AckEntry{ack}, persisted); err != nil {
			return err
		}
	}
	return nil
}

// persistAlone persists an order of an over-delivered entry on its own,
// or dead-letters it if attempts on its own keep dying (see handle). It
// returns the order if it is in MySQL now.
func (w *worker) persistAlone(ctx context.Context, it item) ([]item, error) {
	field := markField(it.entry, strconv.FormatInt(it.order.ID, 10))
	cmd := w.c.client.B().Hincrby().Key(w.keys.Tries).Field(field).Increment(1).Build()
	tries, err := w.c.client.Do(ctx, cmd).AsInt64()
	if err != nil {
		return nil, err
	}
	var persisted []item
	if tries > w.c.cfg.MaxDeliveries {
		reason := fmt.Sprintf("delivered %d times; %d attempts to persist it on its own did not finish", it.deliveries, tries-1)
		err = w.deadLetter(ctx, it, "", "", layout.DeadPoison, reason)
	} else {
		persisted, err = w.persist(ctx, []item{it})
	}
	if err != nil {
		// A stop or an outage is not a death: only attempts that never
		// return (the process died in them) may count against the order.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = w.c.client.Do(dctx, w.c.client.B().Hincrby().Key(w.keys.Tries).Field(field).Increment(-1).Build()).Error()
		return nil, err
	}
	// Settled: persisted or dead-lettered. The count stays until the
	// entry is acknowledged (settle.go).
	w.marks = append(w.marks, field)
	return persisted, nil
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
		if time.Since(w.touched) >= w.c.cfg.ClaimIdle/3 {
			w.touch(ctx, w.held)
		}
	}
}

// touch resets the idle time of entries this consumer holds, without
// counting a delivery (XCLAIM JUSTID), so ClaimIdle does not expire while
// it waits for MySQL.
func (w *worker) touch(ctx context.Context, items []item) {
	w.touched = time.Now()
	if len(items) == 0 {
		return
	}
	var ids []string
	for _, it := range items {
		if len(ids) == 0 || ids[len(ids)-1] != it.entry { // an entry's orders are together
			ids = append(ids, it.entry)
		}
	}
	cmd := w.c.client.B().Xclaim().Key(w.keys.Orders).Group(w.c.cfg.Group).Consumer(w.c.cfg.Name).
		MinIdleTime("0").Id(ids...).Justid().Build()
	if err := w.c.client.Do(ctx, cmd).Error(); err != nil {
		w.log.Warn("async: could not touch the entries being retried; another consumer may take them over", "err", err)
	}
}

// ack acknowledges entries, whose orders are persisted (persisted) or
// dead-lettered, and trims the stream (ack.lua). It trims even when there
// is nothing to acknowledge. It also records in Redis the buyer of each
// persisted order Redis may not know (see ack.lua): those of entries not
// pending any more, and those whose entry is not among entries (a chunk
// that ended inside an entry). Once an ack has told it the voucher's
// limit is 1, it leaves the orders of entries out (layout.AckLean). Its
// time sizes the next reads (pace.go).
func (w *worker) ack(ctx context.Context, entries []layout.AckEntry, persisted []item) error {
	acks := make([]layout.AckEntry, len(entries))
	at := make(map[string]int, len(entries))
	for i, e := range entries {
		acks[i] = layout.AckEntry{ID: e.ID, Orders: e.Orders}
		at[e.ID] = i
	}
	var others []flashsale.Order
	for _, it := range persisted {
		if i, ok := at[it.entry]; ok {
			acks[i].Persisted = append(acks[i].Persisted, it.order)
		} else {
			others = append(others, it.order)
		}
	}
	start := time.Now()
	var res layout.AckResult
	var err error
	if w.limitOne { // the orders' buyers go only with entries not pending (ack.lua)
		res, err = layout.AckLean(ctx, w.c.client, w.keys, w.c.cfg.Group, acks, others)
	} else {
		res, err = layout.Ack(ctx, w.c.client, w.keys, w.c.cfg.Group, acks, others, false)
	}
	if err != nil {
		return err
	}
	w.limitOne = res.Limit == 1
	if len(persisted) > 1 { // one order's quick ack says nothing of a read's
		w.paced(time.Since(start))
	}
	return nil
}

// deadLetter moves an order to the dead-letter stream with its kind and
// reason and reports it. order and user default to the item's order.
func (w *worker) deadLetter(ctx context.Context, it item, order, user string, kind layout.DeadKind, reason string) error {
	if order == "" && it.order.ID != 0 {
		order = strconv.FormatInt(it.order.ID, 10)
	}
	if user == "" && it.order.UserID != 0 {
		user = strconv.FormatInt(it.order.UserID, 10)
	}
	keys := []string{w.keys.Orders, w.keys.Dead, w.keys.Failed, w.keys.Tries}
	args := []string{w.c.cfg.Group, it.entry, order, user, reason, strconv.FormatInt(it.deliveries, 10), string(kind), strconv.Itoa(it.order.Units())}
	moved, err := deadScript.Exec(ctx, w.c.client, keys, args).AsInt64()
	if err != nil {
		return err
	}
	w.marks = append(w.marks, markField(it.entry, order))
	if moved == 1 {
		w.c.deadLettered.Add(1)
		w.log.Error("async: order dead-lettered: it will not be persisted; reconciliation gives its stock back unless MySQL had none for it",
			"entry", it.entry, "order", order, "user", user, "kind", kind, "reason", reason, "deliveries", it.deliveries)
	}
	return nil
}
