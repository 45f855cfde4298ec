-- The database's identity: one row, a random id written by the first
-- process that asks for it (DB.Identity). A Redis key prefix is claimed
-- for one database by this id, so two deployments pointed at one Redis
-- with the same prefix are told apart: the second refuses to start.
-- A copy of the database (a backup restored elsewhere) carries the id:
-- delete the row in the copy to give it one of its own.

-- +goose Up
CREATE TABLE system_identity (
    singleton  INT         NOT NULL PRIMARY KEY,
    id         VARCHAR(64) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    CONSTRAINT system_identity_one_row CHECK (singleton = 1)
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;

-- +goose Down
DROP TABLE system_identity;
