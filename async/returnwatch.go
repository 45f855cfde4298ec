package async

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// WatchReturns makes the instance forget that a voucher is sold out as
// soon as a return puts units of it back (every Restocker announces them),
// until ctx ends. Without it, an instance sees returned units once it
// forgets the sell-out on its own, after Config.VerdictTTL; a notice lost
// while the subscription reconnects falls back to that.
func (s *Service) WatchReturns(ctx context.Context) {
	for ctx.Err() == nil {
		// A connection of its own: on RESP2 (miniredis, older servers) a
		// subscribed connection takes no other command.
		dc, release := s.client.Dedicate()
		sub := dc.B().Subscribe().Channel(s.keys.ReturnsChannel()).Build()
		err := dc.Receive(ctx, sub, func(m rueidis.PubSubMessage) {
			if id, err := strconv.ParseInt(m.Message, 10, 64); err == nil {
				s.forgetSoldOut(id)
			}
		})
		release()
		if ctx.Err() == nil {
			s.log.Warn("async: the subscription to returned units broke; subscribing again", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
}

// forgetSoldOut drops what the instance remembers of a voucher's refusals,
// so the next order asks Redis.
func (s *Service) forgetSoldOut(voucherID int64) {
	if l, ok := s.locals.Load(voucherID); ok {
		l.(*local).notices.Add(1) // before: a reply decoded after it sees it
		l.(*local).verdict.Store(nil)
	}
}
