package consume

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// A consumer that dies (SIGKILL, a crash, a lost machine) leaves the
// entries it was delivered pending on its name. ClaimIdle alone would
// leave them there for ClaimIdle, which must be well above the time a
// batch takes. So each consumer keeps a heartbeat key in Redis, renewed
// every Heartbeat/5 with a lifetime of Heartbeat, and each worker looks,
// every Heartbeat/5, for the consumers holding entries of its stream
// whose heartbeat is gone, and takes their entries over (takeover.lua).
//
// A live consumer's entries are never taken this way: its heartbeat is
// renewed by a goroutine of its own, whatever its batches are doing, and
// takeover.lua takes only entries idle for Heartbeat, so an entry read
// just before its consumer's heartbeat was last seen stays with it. A
// consumer that cannot reach Redis for Heartbeat (a partition, a pause)
// counts as dead; if it comes back its batch is persisted twice, which
// persisting idempotently makes harmless (the second finds the orders
// present), and acknowledged twice, which Redis ignores.

// heartbeat writes the consumer's heartbeat and renews it until ctx is
// done. The returned function stops renewing it and deletes it, so that
// others take over what this consumer left pending at once.
func (c *Consumer) heartbeat(ctx context.Context) (stop func()) {
	key := c.keys.Heartbeat(c.cfg.Group, c.cfg.Name)
	beat := func(ctx context.Context) error {
		cmd := c.client.B().Set().Key(key).Value(strconv.FormatInt(time.Now().UnixMilli(), 10)).Px(c.cfg.Heartbeat).Build()
		return c.client.Do(ctx, cmd).Error()
	}
	failing := false
	report := func(err error) {
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			c.log.Warn("async: cannot renew the consumer's heartbeat; once it expires others take over its entries", "err", err)
		case err == nil && failing:
			c.log.Info("async: the consumer's heartbeat is renewed again")
		}
		failing = err != nil
	}
	report(beat(ctx))
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(c.cfg.Heartbeat / 5)
		defer tick.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-tick.C:
				report(beat(bctx))
			}
		}
	}()
	return func() {
		cancel()
		<-done
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := c.client.Do(dctx, c.client.B().Del().Key(key).Build()).Error(); err != nil {
			c.log.Warn("async: could not delete the consumer's heartbeat; its entries are taken over once it expires", "err", err)
		}
	}
}

// dead returns those of the consumers whose heartbeat is gone.
func (c *Consumer) dead(ctx context.Context, consumers []string) ([]string, error) {
	cmds := make(rueidis.Commands, len(consumers))
	for i, name := range consumers {
		cmds[i] = c.client.B().Exists().Key(c.keys.Heartbeat(c.cfg.Group, name)).Build()
	}
	var dead []string
	for i, res := range c.client.DoMulti(ctx, cmds...) {
		n, err := res.AsInt64()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			dead = append(dead, consumers[i])
		}
	}
	return dead, nil
}

// holders returns the consumers other than this one that hold pending
// entries of the worker's stream.
func (w *worker) holders(ctx context.Context) ([]string, error) {
	cmd := w.c.client.B().Xpending().Key(w.keys.Orders).Group(w.c.cfg.Group).Build()
	summary, err := w.c.client.Do(ctx, cmd).ToArray()
	if err != nil || len(summary) < 4 {
		return nil, err
	}
	per, err := summary[3].ToArray()
	if rueidis.IsRedisNil(err) { // nothing pending
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range per {
		f, err := p.AsStrSlice()
		if err != nil || len(f) < 2 {
			return nil, err
		}
		if f[0] != w.c.cfg.Name {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// takeFromDead takes over the entries of the voucher's consumers whose
// heartbeat is gone, and persists them.
func (w *worker) takeFromDead(ctx context.Context) error {
	holders, err := w.holders(ctx)
	if err != nil || len(holders) == 0 {
		return err
	}
	dead, err := w.c.dead(ctx, holders)
	if err != nil {
		return err
	}
	minIdle := strconv.FormatInt(w.c.cfg.Heartbeat.Milliseconds(), 10)
	for _, name := range dead {
		for more := true; more; { // a full pass may have left more
			count := w.readEntries()
			args := []string{w.c.cfg.Group, w.c.cfg.Name, name, minIdle, strconv.Itoa(count)}
			res, err := takeoverScript.Exec(ctx, w.c.client, []string{w.keys.Orders}, args).ToArray()
			if err != nil {
				return err
			}
			if len(res) != 3 {
				return fmt.Errorf("async: takeover.lua answered %d values", len(res))
			}
			n, err := w.takeOver(ctx, res[0], res[1], res[2], name)
			if err != nil {
				return err
			}
			more = n == count
		}
	}
	return nil
}
