-- The transactional outbox (docs/events.md): every event is written in the
-- transaction of the change it reports. id is the event's sequence and the
-- source of its id (evt_<id>); pos is its place in the log readers follow,
-- given after commit by the sequencer (DB.SequenceEvents) in the order rows
-- become visible, so a cursor over pos never passes an event that commits
-- later. SQLite: "INTEGER PRIMARY KEY" is the rowid, max + 1 (pruning
-- keeps the newest row, so an id is never reused); MySQL: AUTO_INCREMENT,
-- widened to BIGINT by the second statement, a comment to SQLite.
--
-- outbox_cursors: the sequencer's next pos ('sequence') and each sink's
-- cursor (the pos delivered up to), with the lease of the instance that
-- relays it.
--
-- webhooks: the shop's endpoints, with the delivery state of the event at
-- the head of each one's queue; webhook_dead_letters: the events an
-- endpoint never took, with their bodies, until the admin redelivers them.

-- +goose Up
CREATE TABLE outbox (
    id          INTEGER      NOT NULL PRIMARY KEY /*! AUTO_INCREMENT */,
    type        VARCHAR(32)  NOT NULL,
    order_id    BIGINT       NOT NULL DEFAULT 0,
    voucher_id  BIGINT       NOT NULL,
    data        TEXT         NOT NULL,
    occurred_at DATETIME(6)  NOT NULL,
    pos         BIGINT       NULL
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;
/*! ALTER TABLE outbox MODIFY id BIGINT NOT NULL AUTO_INCREMENT */;
CREATE INDEX outbox_pos ON outbox (pos);

CREATE TABLE outbox_cursors (
    name        VARCHAR(64) NOT NULL PRIMARY KEY,
    pos         BIGINT      NOT NULL,
    owner       VARCHAR(64) NOT NULL DEFAULT '',
    lease_until DATETIME(6) NULL
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;
INSERT INTO outbox_cursors (name, pos) VALUES ('sequence', 1);

CREATE TABLE webhooks (
    id            BIGINT        NOT NULL PRIMARY KEY,
    url           VARCHAR(2048) NOT NULL,
    events        VARCHAR(512)  NOT NULL,
    secret        VARCHAR(128)  NOT NULL,
    disabled      SMALLINT      NOT NULL DEFAULT 0,
    attempts      INT           NOT NULL DEFAULT 0,
    next_at       DATETIME(6)   NULL,
    last_error    VARCHAR(255)  NOT NULL DEFAULT '',
    created_at    DATETIME(6)   NOT NULL
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;

CREATE TABLE webhook_dead_letters (
    webhook_id BIGINT       NOT NULL,
    event_id   BIGINT       NOT NULL,
    body       TEXT         NOT NULL,
    attempts   INT          NOT NULL,
    last_error VARCHAR(255) NOT NULL,
    dead_at    DATETIME(6)  NOT NULL,
    PRIMARY KEY (webhook_id, event_id)
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;

-- +goose Down
DROP TABLE webhook_dead_letters;
DROP TABLE webhooks;
DROP TABLE outbox_cursors;
DROP TABLE outbox;
