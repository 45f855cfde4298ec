-- An order's Idempotency-Key is compared byte for byte, as Redis and the
-- gate compare it: utf8mb4's default collation ignores case and accents,
-- so "abc" and "ABC" of one buyer clashed on UNIQUE (voucher_id, user_id,
-- idempotency_key) and the consumer's INSERT IGNORE skipped one of them.
-- SQLite compares TEXT with its BINARY collation already; the statement
-- is MySQL's and MariaDB's only (a comment to SQLite).

-- +goose Up
/*! ALTER TABLE orders MODIFY idempotency_key VARBINARY(255) NULL */;

-- +goose Down
/*! ALTER TABLE orders MODIFY idempotency_key VARCHAR(255) NULL */;
