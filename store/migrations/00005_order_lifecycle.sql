-- An order's life after it is placed, and the purchase rules (see
-- docs/lifecycle.md): a payment window, cancel and expiry that return the
-- units, a quantity per order and a per-buyer limit.
--
-- orders is rebuilt (SQLite cannot drop a table constraint): it gains
-- quantity, pay_by, payment_id, idempotency_key and return_pending, and
-- loses UNIQUE (voucher_id, user_id): a buyer who cancelled may buy again,
-- and a limit of 3 allows 3 orders. Its place as the last line of defence
-- goes to buyer_units, whose CHECK refuses a buyer's live units above the
-- voucher's limit whatever the code in front of it decided.

-- +goose Up
ALTER TABLE vouchers ADD COLUMN payment_window_seconds INT NOT NULL DEFAULT 0 CHECK (payment_window_seconds BETWEEN 0 AND 86400);
ALTER TABLE vouchers ADD COLUMN limit_per_buyer INT NOT NULL DEFAULT 1 CHECK (limit_per_buyer BETWEEN 1 AND 100);

CREATE TABLE orders_v5 (
    id              BIGINT       NOT NULL PRIMARY KEY,
    voucher_id      BIGINT       NOT NULL,
    user_id         BIGINT       NOT NULL,
    quantity        INT          NOT NULL DEFAULT 1,
    status          VARCHAR(16)  NOT NULL,
    pay_by          DATETIME(6)  NULL,
    payment_id      VARCHAR(255) NULL,
    idempotency_key VARCHAR(255) NULL,
    -- 1 while the unit return's Redis half (async) is not done yet.
    return_pending  SMALLINT     NOT NULL DEFAULT 0,
    created_at      DATETIME(6)  NOT NULL,
    updated_at      DATETIME(6)  NOT NULL,
    UNIQUE (payment_id),
    UNIQUE (voucher_id, user_id, idempotency_key),
    CHECK (quantity BETWEEN 1 AND 100),
    CHECK (status IN ('pending', 'awaiting_payment', 'paid', 'cancelled', 'expired', 'created', 'failed')),
    CHECK (status <> 'awaiting_payment' OR pay_by IS NOT NULL),
    CHECK (return_pending IN (0, 1))
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;

INSERT INTO orders_v5 (id, voucher_id, user_id, status, created_at, updated_at)
    SELECT id, voucher_id, user_id, status, created_at, updated_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_v5 RENAME TO orders;
CREATE INDEX orders_user ON orders (user_id);
CREATE INDEX orders_due ON orders (status, pay_by);
CREATE INDEX orders_returns ON orders (return_pending);

-- A buyer's live units of a voucher (live: pending, awaiting_payment, paid,
-- created). max_units is the voucher's limit_per_buyer, copied so a CHECK
-- can hold it.
CREATE TABLE buyer_units (
    voucher_id BIGINT NOT NULL,
    user_id    BIGINT NOT NULL,
    units      INT    NOT NULL,
    max_units  INT    NOT NULL,
    PRIMARY KEY (voucher_id, user_id),
    CHECK (units >= 0 AND units <= max_units)
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;

INSERT INTO buyer_units (voucher_id, user_id, units, max_units)
    SELECT voucher_id, user_id, COUNT(*), 1 FROM orders WHERE status <> 'failed' GROUP BY voucher_id, user_id;

-- +goose Down
DROP TABLE buyer_units;
CREATE TABLE orders_v4 (
    id         BIGINT      NOT NULL PRIMARY KEY,
    voucher_id BIGINT      NOT NULL,
    user_id    BIGINT      NOT NULL,
    status     VARCHAR(16) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    UNIQUE (voucher_id, user_id),
    CHECK (status IN ('pending', 'created', 'failed'))
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;
INSERT INTO orders_v4 (id, voucher_id, user_id, status, created_at, updated_at)
    SELECT id, voucher_id, user_id, CASE WHEN status IN ('pending', 'created', 'failed') THEN status ELSE 'created' END, created_at, updated_at
    FROM orders WHERE status NOT IN ('cancelled', 'expired');
DROP TABLE orders;
ALTER TABLE orders_v4 RENAME TO orders;
CREATE INDEX orders_user ON orders (user_id);
ALTER TABLE vouchers DROP COLUMN limit_per_buyer;
ALTER TABLE vouchers DROP COLUMN payment_window_seconds;
