package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestBadURLNeverEchoesAPassword: bad URLs that are not mysql://… (a
// go-sql-driver DSN, a scheme typo, an unescaped '/') are reported without
// their password.
func TestBadURLNeverEchoesAPassword(t *testing.T) {
	for _, u := range []string{
		"root:s3cret@tcp(127.0.0.1:3306)/db", // a go-sql-driver DSN instead of a URL
		"mysql:/root:s3cret@127.0.0.1:3306/db",
		"mysql//root:s3cret@127.0.0.1:3306/db",
		"mysql://root:12345/s3cret@127.0.0.1:3306/db", // unescaped '/' in the password
	} {
		_, err := Open(context.Background(), u)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error leaks the password: %v", u, err)
		}
	}
}

// TestInsertOrderRefusesUnknownStatusesOnBothDialects: MariaDB's CHECK
// compares without case and trailing spaces, and a long status does not
// fit its column; both dialects must refuse them alike, as invalid.
func TestInsertOrderRefusesUnknownStatusesOnBothDialects(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		for i, st := range []flashsale.OrderStatus{"Created", "FAILED", "created ", "pending-payment-x"} {
			o := &flashsale.Order{ID: int64(100 + i), VoucherID: 1, UserID: int64(10 + i), Status: st}
			err := db.InsertOrder(t.Context(), o, 1)
			if flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("%s: InsertOrder(status %q) = code %q, %v; want %q as on the other dialect",
					db.Dialect(), st, flashsale.ErrorCode(err), err, flashsale.EInvalid)
			}
		}
	})
}

// TestOpenUnreachableIsUnavailable: a server that refuses connections at
// Open is EUnavailable, as it is for every call after Open.
func TestOpenUnreachableIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, "mysql://root@127.0.0.1:1/db")
	if flashsale.ErrorCode(err) != flashsale.EUnavailable {
		t.Errorf("Open of a refused port = code %q, %v; want %q", flashsale.ErrorCode(err), err, flashsale.EUnavailable)
	}
}
