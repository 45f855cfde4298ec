package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// dialects are the databases every test runs against: a fresh MariaDB/MySQL
// database and a SQLite file in the test's temporary directory.
var dialects = []struct {
	name string
	url  func(t testing.TB) string
}{
	{MySQL, testenv.MySQLURL},
	{SQLite, sqliteURL},
}

// sqliteURL returns the URL of a new SQLite file in t's temporary directory.
func sqliteURL(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "flashsale.db")
}

// forEachDialect runs test, in parallel, once per dialect with a freshly
// opened and migrated database.
func forEachDialect(t *testing.T, test func(t *testing.T, db *DB)) {
	t.Helper()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			test(t, openDB(t, d.url(t)))
		})
	}
}

// openDB opens url and closes the database when the test ends.
func openDB(t testing.TB, url string) *DB {
	t.Helper()
	db, err := Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// saleStart is a fixed sale window start with nanoseconds, in a zone other
// than UTC, so the tests see time conversion and truncation.
var saleStart = time.Date(2025, 11, 11, 20, 0, 0, 123456789, time.FixedZone("CST", 8*3600))

// newVoucher returns a valid voucher with the id and stock.
func newVoucher(id int64, stock int) *flashsale.Voucher {
	return &flashsale.Voucher{
		ID:          id,
		Title:       "秒杀券 voucher",
		PayValue:    9900,
		ActualValue: 10000,
		Stock:       stock,
		BeginTime:   saleStart,
		EndTime:     saleStart.Add(2 * time.Hour),
	}
}

// createVoucher stores a voucher with the id and stock, failing the test on
// error.
func createVoucher(t testing.TB, db *DB, id int64, stock int) *flashsale.Voucher {
	t.Helper()
	v := newVoucher(id, stock)
	if err := db.CreateVoucher(context.Background(), v); err != nil {
		t.Fatalf("CreateVoucher(%d): %v", id, err)
	}
	return v
}

// wantCode fails the test unless err carries the flashsale error code.
func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if got := flashsale.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}
