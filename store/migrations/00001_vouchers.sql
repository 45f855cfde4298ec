-- Vouchers: a limited stock sold during a sale window. The id comes from the
-- service's ID generator (no auto-increment, which keeps the DDL portable).
-- Money is in cents. Times are UTC with microseconds.
--
-- The file is shared by MySQL/MariaDB and SQLite: the /*! ... */ table
-- options are executed by MySQL and MariaDB only and are a comment to SQLite.

-- +goose Up
CREATE TABLE vouchers (
    id           BIGINT       NOT NULL PRIMARY KEY,
    title        VARCHAR(255) NOT NULL,
    pay_value    BIGINT       NOT NULL DEFAULT 0,
    actual_value BIGINT       NOT NULL DEFAULT 0,
    stock        INT          NOT NULL,
    remaining    INT          NOT NULL,
    begin_time   DATETIME(6)  NOT NULL,
    end_time     DATETIME(6)  NOT NULL,
    created_at   DATETIME(6)  NOT NULL,
    updated_at   DATETIME(6)  NOT NULL,
    CONSTRAINT vouchers_remaining_nonnegative CHECK (remaining >= 0),
    CONSTRAINT vouchers_remaining_within_stock CHECK (remaining <= stock)
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;

-- +goose Down
DROP TABLE vouchers;
