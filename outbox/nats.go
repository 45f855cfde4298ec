package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS publishes events to a JetStream stream, on subjects
// <subject>.<type>, with Nats-Msg-Id the event's id, so the stream's
// duplicate window drops a republished event. An event counts as
// delivered once its publish is acknowledged.
type NATS struct {
	js              jetstream.JetStream
	subject, stream string
}

// natsAckWait bounds the wait for a batch's publish acknowledgements.
const natsAckWait = 10 * time.Second

// NewNATS returns the sink of subject on nc's JetStream, creating the
// stream (capturing <subject>.>) if it is missing.
func NewNATS(ctx context.Context, nc *nats.Conn, subject, stream string) (*NATS, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(natsAckWait), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, fmt.Errorf("outbox: jetstream: %w", err)
	}
	_, err = js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}, Storage: jetstream.FileStorage})
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: stream %s: %w", stream, err)
	}
	return &NATS{js: js, subject: subject, stream: stream}, nil
}

// Subject returns the sink's subject prefix.
func (s *NATS) Subject() string { return s.subject }

// Stream returns the sink's stream.
func (s *NATS) Stream() string { return s.stream }

// Name implements Sink: one cursor per subject.
func (s *NATS) Name() string { return "nats:" + s.subject }

// Start implements Sink: a new NATS sink starts with every event kept.
func (s *NATS) Start(context.Context, *store.DB) (int64, error) { return 0, nil }

// Deliver implements Sink. Events are published asynchronously and their
// acknowledgements awaited together, except that two events of one order
// (or voucher) are never in flight at once: if the first were lost and
// the second stored, a consumer would see them out of order.
func (s *NATS) Deliver(ctx context.Context, events []store.OutboxEvent) (int, error) {
	done := 0
	for done < len(events) {
		n, err := s.window(ctx, events[done:])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// window publishes the longest prefix of events with one event per key at
// most, and returns how many from the first were acknowledged.
func (s *NATS) window(ctx context.Context, events []store.OutboxEvent) (int, error) {
	keys := map[string]bool{}
	var futures []jetstream.PubAckFuture
	for _, e := range events {
		k := eventKey(e)
		if keys[k] {
			break
		}
		keys[k] = true
		msg := &nats.Msg{Subject: s.subject + "." + string(e.Type), Data: e.AppendJSON(nil), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, e.ID)
		f, err := s.js.PublishMsgAsync(msg)
		if err != nil {
			return s.await(ctx, futures, err)
		}
		futures = append(futures, f)
	}
	return s.await(ctx, futures, nil)
}

// await waits for the futures in order and returns how many from the first
// were acknowledged, with the first failure (or failed, the publish that
// could not be sent).
func (s *NATS) await(ctx context.Context, futures []jetstream.PubAckFuture, failed error) (int, error) {
	timeout := time.NewTimer(natsAckWait + time.Second)
	defer timeout.Stop()
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return i, fmt.Errorf("outbox: publish %s: %w", f.Msg().Header.Get(jetstream.MsgIDHeader), err)
		case <-ctx.Done():
			return i, ctx.Err()
		case <-timeout.C:
			return i, fmt.Errorf("outbox: publish %s: no acknowledgement", f.Msg().Header.Get(jetstream.MsgIDHeader))
		}
	}
	if failed != nil {
		return len(futures), fmt.Errorf("outbox: publish: %w", failed)
	}
	return len(futures), nil
}

// eventKey is what an event is ordered by: its order, or its voucher.
func eventKey(e store.OutboxEvent) string {
	if e.OrderID != 0 {
		return "o" + strconv.FormatInt(e.OrderID, 10)
	}
	return "v" + strconv.FormatInt(e.VoucherID, 10)
}
