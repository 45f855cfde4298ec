-- Orders: one buyer's order for one voucher. The id comes from the service's
-- ID generator. UNIQUE (voucher_id, user_id) is the last line of defence for
-- one order per user, whatever the strategy in front of it got wrong.
--
-- There is deliberately no FOREIGN KEY to vouchers: in InnoDB the check takes
-- a shared lock on the voucher row, and two transactions that each insert an
-- order and then decrement that same row deadlock on the lock upgrade.

-- +goose Up
CREATE TABLE orders (
    id         BIGINT      NOT NULL PRIMARY KEY,
    voucher_id BIGINT      NOT NULL,
    user_id    BIGINT      NOT NULL,
    status     VARCHAR(16) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    CONSTRAINT orders_voucher_user UNIQUE (voucher_id, user_id),
    CONSTRAINT orders_status CHECK (status IN ('pending', 'created', 'failed'))
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;

CREATE INDEX orders_user ON orders (user_id);

-- +goose Down
DROP TABLE orders;
