-- The buyers an identity provider signs in (auth.UseProvider): each
-- (issuer, subject) numbered once, for good; the buyer's id is
-- auth.BuyerBase + id, a range no HS256 subject reaches. The pair is
-- compared byte for byte (VARBINARY on MySQL, SQLite's BINARY collation on
-- TEXT), so "abc", "ABC" and "abc " are three buyers.

-- +goose Up
CREATE TABLE buyer_subjects (
    id         INTEGER      NOT NULL PRIMARY KEY,
    issuer     VARCHAR(255) NOT NULL,
    subject    VARCHAR(255) NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    CONSTRAINT buyer_subjects_pair UNIQUE (issuer, subject)
) /*! ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 */;
/*! ALTER TABLE buyer_subjects MODIFY id BIGINT NOT NULL AUTO_INCREMENT, MODIFY issuer VARBINARY(255) NOT NULL, MODIFY subject VARBINARY(255) NOT NULL */;

-- +goose Down
DROP TABLE buyer_subjects;
