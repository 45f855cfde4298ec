package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// worker consumes one voucher's stream for a Consumer.
type worker struct {
	c       *Consumer
	voucher int64
	keys    layout.VoucherKeys
	log     *slog.Logger

	cursor     string    // where the next XAUTOCLAIM pass starts
	nextClaim  time.Time // when to look for idle entries of other consumers
	nextDead   time.Time // when to look for consumers whose heartbeat is gone
	nextRetire time.Time // when to check whether the voucher is done
	held       []item    // the entries handle is working through
	touched    time.Time // when held was last touched (or read)
	marks      []string  // tries fields to delete once handle's entries are acknowledged (settle.go)
	count      int       // orders the next read is for; 0: BatchSize (pace.go)
	perEntry   int       // orders per entry in the last read; 0: none yet (pace.go)
	lastRead   int       // orders in the last read (pace.go)
	limitOne   bool      // the last ack found the voucher's limit 1: acks may be lean
	drained    bool      // drainOwn has finished once in this worker's life
}

// run consumes until ctx is done, starting over after an error.
func (w *worker) run(ctx context.Context) {
	w.log = w.c.log.With("voucher", w.voucher)
	if w.keys.Body != strconv.FormatInt(w.voucher, 10) {
		w.log = w.log.With("shard", w.keys.Body)
	}
	waiting := false
	for {
		err := w.consume(ctx)
		if ctx.Err() != nil {
			return
		}
		pause := w.c.cfg.Refresh
		switch {
		case errors.Is(err, flashsale.ErrUnknownVoucher):
			waiting = false
			pause = w.unknownVoucher(ctx, err)
		case errors.Is(err, ErrNotReplicated):
			// A partition, or a replica down: the entries wait.
			waiting = false
			w.log.Warn("async: not persisting entries the replicas do not have yet; they stay pending", "err", err)
		case isNoGroup(err):
			// Registered before its stream was created, or lost by Redis:
			// the next load creates it.
			if !waiting {
				w.log.Info("async: waiting for the voucher's stream to be loaded", "err", err)
			}
			waiting = true
		default:
			waiting = false
			w.log.Warn("async: consuming failed; starting over", "err", err)
		}
		if sleep(ctx, pause) != nil {
			return
		}
	}
}

// consume finishes the entries this consumer was delivered before, then
// reads new entries, taking over idle ones of other consumers now and then,
// until ctx is done or Redis fails.
func (w *worker) consume(ctx context.Context) error {
	if err := w.drainOwn(ctx); err != nil {
		return err
	}
	for ctx.Err() == nil {
		if !time.Now().Before(w.nextDead) {
			if err := w.takeFromDead(ctx); err != nil {
				return err
			}
			w.nextDead = time.Now().Add(w.c.cfg.Heartbeat / 5)
		}
		if !time.Now().Before(w.nextClaim) {
			if err := w.claim(ctx); err != nil {
				return err
			}
			w.nextClaim = time.Now().Add(w.c.cfg.ClaimIdle / 2)
		}
		n, err := w.readNew(ctx)
		if err != nil {
			return err
		}
		if err := w.linger(ctx); err != nil {
			return err
		}
		if n == 0 && !time.Now().Before(w.nextRetire) {
			if err := w.retireIfDone(ctx); err != nil {
				return err
			}
			w.nextRetire = time.Now().Add(w.c.cfg.ClaimIdle)
		}
	}
	return ctx.Err()
}

// drainOwn persists the entries delivered to this consumer's name and not
// acknowledged: left by an earlier Run, or by a failure just now.
func (w *worker) drainOwn(ctx context.Context) error {
	// The entries pending when a worker starts were delivered to an
	// earlier process under this name, which may have died on them: they go
	// through the delivery count checks of entries taken over from others,
	// so an order that kills every process reading it is isolated. Re-read
	// after an error, they did not kill this one, and their counts are not
	// looked at (each re-read still adds one in Redis, as XREADGROUP does:
	// the next process may persist them one by one, slower, losing
	// nothing).
	for {
		cmd := w.c.client.B().Xreadgroup().Group(w.c.cfg.Group, w.c.cfg.Name).Count(int64(w.readEntries())).
			Streams().Key(w.keys.Orders).Id("0").Build()
		res, err := w.c.client.Do(ctx, cmd).AsXRead()
		if err != nil {
			return err
		}
		entries := res[w.keys.Orders]
		if len(entries) == 0 {
			w.drained = true
			return nil
		}
		var deliveries []int64
		if !w.drained {
			if deliveries, err = w.deliveries(ctx, entries); err != nil {
				return err
			}
		}
		if err := w.handle(ctx, entries, deliveries, true); err != nil {
			return err
		}
	}
}

// deliveries returns how many times each of entries, pending for this
// consumer, has been delivered, in their order (0 for one no longer
// pending for it).
func (w *worker) deliveries(ctx context.Context, entries []rueidis.XRangeEntry) ([]int64, error) {
	cmd := w.c.client.B().Xpending().Key(w.keys.Orders).Group(w.c.cfg.Group).Start(entries[0].ID).
		End(entries[len(entries)-1].ID).Count(int64(len(entries))).Consumer(w.c.cfg.Name).Build()
	pending, err := w.c.client.Do(ctx, cmd).ToArray()
	if err != nil {
		return nil, err
	}
	byID := make(map[string]int64, len(pending))
	for _, p := range pending {
		f, err := p.ToArray()
		if err != nil {
			return nil, err
		}
		if len(f) < 4 {
			return nil, fmt.Errorf("async: unexpected XPENDING entry %v", f)
		}
		id, _ := f[0].ToString()
		byID[id], _ = f[3].AsInt64()
	}
	counts := make([]int64, len(entries))
	for i, e := range entries {
		counts[i] = byID[e.ID]
	}
	return counts, nil
}

// readNew reads and persists new entries, readEntries of them, waiting
// up to Block for them, and returns how many it read.
func (w *worker) readNew(ctx context.Context) (int, error) {
	w.lastRead = 0 // learn sets it from what the read brought
	cmd := w.c.client.B().Xreadgroup().Group(w.c.cfg.Group, w.c.cfg.Name).Count(int64(w.readEntries())).
		Block(w.c.cfg.Block.Milliseconds()).Streams().Key(w.keys.Orders).Id(">").Build()
	res, err := w.c.client.Do(ctx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	entries := res[w.keys.Orders]
	return len(entries), w.handle(ctx, entries, nil, false)
}

// claim takes over the entries other consumers have left idle for
// ClaimIdle (they died, or hang), in one pass over the group's pending
// entries, and persists them. It also deletes consumers without pending
// entries that have been idle for twice ClaimIdle: processes that are gone.
func (w *worker) claim(ctx context.Context) error {
	if w.cursor == "" {
		w.cursor = "0-0"
	}
	for {
		args := []string{w.c.cfg.Group, w.c.cfg.Name, strconv.FormatInt(w.c.cfg.ClaimIdle.Milliseconds(), 10),
			w.cursor, strconv.Itoa(w.readEntries())}
		res, err := claimScript.Exec(ctx, w.c.client, []string{w.keys.Orders}, args).ToArray()
		if err != nil {
			return err
		}
		if len(res) != 4 {
			return fmt.Errorf("async: claim.lua answered %d values", len(res))
		}
		next, err := res[0].ToString()
		if err != nil {
			return err
		}
		if _, err := w.takeOver(ctx, res[1], res[2], res[3], ""); err != nil {
			return err
		}
		w.cursor = next
		if next == "0-0" {
			break
		}
	}
	idle := strconv.FormatInt(2*w.c.cfg.ClaimIdle.Milliseconds(), 10)
	return reapScript.Exec(ctx, w.c.client, []string{w.keys.Orders}, []string{w.c.cfg.Group, idle}).Error()
}

// takeOver persists entries this consumer took over, with their delivery
// counts, and reports those gone from the stream: the parts of a reply of
// claim.lua or takeover.lua. from names the dead consumer they were taken
// from ("": left idle for ClaimIdle by any). It returns how many entries
// and gone ids there were.
func (w *worker) takeOver(ctx context.Context, entriesMsg, countsMsg, goneMsg rueidis.RedisMessage, from string) (int, error) {
	entries, err := entriesMsg.AsXRange()
	if err != nil {
		return 0, err
	}
	counts, err := countsMsg.AsIntSlice()
	if err != nil {
		return 0, err
	}
	gone, err := goneMsg.AsStrSlice()
	if err != nil {
		return 0, err
	}
	for _, id := range gone {
		w.lostEntry(id)
	}
	if len(entries) == 0 {
		return len(gone), nil
	}
	w.c.claimed.Add(uint64(len(entries)))
	if from == "" {
		w.log.Info("async: took over entries another consumer left idle", "entries", len(entries))
	} else {
		w.c.claimedDead.Add(uint64(len(entries)))
		w.log.Info("async: took over the entries of a consumer whose heartbeat stopped", "entries", len(entries), "from", from)
	}
	return len(entries) + len(gone), w.handle(ctx, entries, counts, true)
}

// retireIfDone removes the voucher from the registry when its sale is over
// and every order is persisted: no entry can arrive any more. Whoever adds
// an entry later (reconciliation) appends it first and registers the
// voucher again after, so removing, then checking again and re-adding on a
// surprise, never strands an entry.
func (w *worker) retireIfDone(ctx context.Context) error {
	done, err := w.done(ctx)
	if err != nil || !done {
		return err
	}
	id := w.keys.Body // the voucher's id, or its shard's tag
	if err := w.c.client.Do(ctx, w.c.client.B().Srem().Key(w.c.keys.Registry()).Member(id).Build()).Error(); err != nil {
		return err
	}
	// Past the SREM, finish even if the worker is being stopped: an entry
	// appended meanwhile would otherwise never be read.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if done, err = w.done(ctx); err == nil && done {
		w.log.Info("async: the sale is over and every order is persisted; voucher retired from the registry")
		return w.c.scheduleRetire(ctx, w.voucher)
	}
	return w.c.client.Do(ctx, w.c.client.B().Sadd().Key(w.c.keys.Registry()).Member(id).Build()).Error()
}

// done reports whether the sale is over by Redis's clock and the group has
// acknowledged every entry.
func (w *worker) done(ctx context.Context) (bool, error) {
	_, entries, ended, err := layout.StreamBacklog(ctx, w.c.client, w.keys, w.c.cfg.Group)
	return err == nil && entries == 0 && ended, err
}

// lostEntry reports an entry that was pending but is gone from the stream.
func (w *worker) lostEntry(id string) {
	w.c.lost.Add(1)
	w.log.Error("async: a pending entry was deleted from the stream before it was persisted; reconciliation re-queues its order", "entry", id)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
