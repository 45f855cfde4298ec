-- One outbox row may hold several events (docs/events.md): a batch of new
-- orders (the consumer's persist, the batch strategy) is one order.placed
-- row with order_id 0, n its orders and data their ids, which the readers
-- expand from the orders table; every other row holds one event (n = 1).
-- The sequencer gives a row n positions, pos to pos + n - 1: one per
-- event, and an event's sequence and id are its position.

-- +goose Up
ALTER TABLE outbox ADD COLUMN n INT NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE outbox DROP COLUMN n;
