-- A voucher's admission: "open" (anyone may order) or "queue" (a waiting
-- room hands out single-use passes, admit_per_second at most per second;
-- package admission). Existing vouchers are open.

-- +goose Up
ALTER TABLE vouchers ADD COLUMN admission VARCHAR(8) NOT NULL DEFAULT 'open' CHECK (admission IN ('open', 'queue'));
ALTER TABLE vouchers ADD COLUMN admit_per_second INT NOT NULL DEFAULT 0 CHECK (admit_per_second BETWEEN 0 AND 100000);

-- +goose Down
ALTER TABLE vouchers DROP COLUMN admit_per_second;
ALTER TABLE vouchers DROP COLUMN admission;
