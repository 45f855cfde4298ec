-- A voucher's live orders (pending, awaiting_payment, paid, created),
-- counted as they change, in the transactions that change them (the ones
-- that add to and take from buyer_units): GET /api/vouchers/{id} and the
-- list read it from the voucher's row instead of counting the voucher's
-- orders on every request, which a buyer could make as slow as he liked
-- by ordering and cancelling.

-- +goose Up
ALTER TABLE vouchers ADD COLUMN live_orders INT NOT NULL DEFAULT 0 CHECK (live_orders >= 0);
UPDATE vouchers SET live_orders = (SELECT COUNT(*) FROM orders o
    WHERE o.voucher_id = vouchers.id AND o.status IN ('pending', 'awaiting_payment', 'paid', 'created'));

-- +goose Down
ALTER TABLE vouchers DROP COLUMN live_orders;
