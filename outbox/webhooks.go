package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// webhooksEvery is how often the relay looks for webhooks added, deleted
// or disabled.
const webhooksEvery = 2 * time.Second

// webhooks runs one relay loop per enabled webhook, starting and stopping
// them as the registry changes.
func (r *Relay) webhooks(ctx context.Context) {
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	loops := map[int64]running{}
	var wg sync.WaitGroup
	defer func() {
		for _, l := range loops {
			l.cancel()
		}
		wg.Wait()
	}()
	for ctx.Err() == nil {
		hooks, err := r.DB.WebhookSinks(ctx) // every 2 s: no count of dead letters
		if err != nil && ctx.Err() == nil {
			r.Logger.Warn("outbox: listing webhooks", "err", err)
		}
		want := map[int64]flashsale.Webhook{}
		for _, h := range hooks {
			if !h.Disabled {
				want[h.ID] = h
			}
		}
		for id, l := range loops {
			select {
			case <-l.done:
				delete(loops, id)
				continue
			default:
			}
			if _, ok := want[id]; !ok && err == nil {
				l.cancel()
				delete(loops, id)
			}
		}
		for id, h := range want {
			if _, ok := loops[id]; ok {
				continue
			}
			lctx, cancel := context.WithCancel(ctx)
			l := running{cancel, make(chan struct{})}
			loops[id] = l
			sink := &Webhook{hook: h, db: r.DB, client: r.WebhookClient, retryFor: r.WebhookRetryFor}
			wg.Go(func() {
				defer close(l.done)
				r.relay(lctx, sink)
			})
		}
		sleep(ctx, webhooksEvery)
	}
}
