-- A voucher's stock may be split into shards, each on its own Redis slot,
-- so several Redis nodes serve one hot voucher (the async strategy; see
-- async/shard.go). MySQL keeps one row per voucher whatever the shards.

-- +goose Up
ALTER TABLE vouchers ADD COLUMN shards INT NOT NULL DEFAULT 1 CHECK (shards BETWEEN 1 AND 64);

-- +goose Down
ALTER TABLE vouchers DROP COLUMN shards;
