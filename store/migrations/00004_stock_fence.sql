-- The highest fencing token a write of a voucher's remaining stock has
-- carried: a holder of the voucher's stock lock whose lease ran out while
-- it was paused carries a lower one than the holder after it, and its
-- write is refused (SetRemainingFenced). 0: no fenced write yet.

-- +goose Up
ALTER TABLE vouchers ADD COLUMN stock_fence BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE vouchers DROP COLUMN stock_fence;
