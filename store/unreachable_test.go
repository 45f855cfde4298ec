package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/go-sql-driver/mysql"
)

func TestWrapClassifiesDriverErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, flashsale.EUnavailable},
		{"connection broken mid-query", mysql.ErrInvalidConn, flashsale.EUnavailable},
		{"bad connection", driver.ErrBadConn, flashsale.EUnavailable},
		{"deadlock", &mysql.MySQLError{Number: mysqlDeadlock}, flashsale.EBusy},
		{"duplicate key", &mysql.MySQLError{Number: mysqlDuplicateKey}, flashsale.EInternal},
		{"a domain error keeps its code", flashsale.Errorf(flashsale.ENotFound, "no such voucher"), flashsale.ENotFound},
		{"anything else", errors.New("boom"), flashsale.EInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wrap("op", tt.err)
			if got := flashsale.ErrorCode(err); got != tt.want {
				t.Errorf("code %q, want %q (%v)", got, tt.want, err)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("%v does not wrap %v", err, tt.err)
			}
		})
	}
}

// TestStoppedDatabaseIsUnavailable: with the MySQL server down, reads and
// transactions fail as EUnavailable with a Retry-After, which the HTTP
// layer answers 503, not as internal errors.
func TestStoppedDatabaseIsUnavailable(t *testing.T) {
	m := testenv.StartMariaDB(t)
	db := openDB(t, m.URL())
	ctx := context.Background()
	if _, err := db.FindOrder(ctx, 1); flashsale.ErrorCode(err) != flashsale.ENotFound {
		t.Fatalf("FindOrder with the server up = %v; want not found", err)
	}
	m.Stop()
	ops := map[string]func() error{
		"FindOrder": func() error { _, err := db.FindOrder(ctx, 1); return err },
		"Tx":        func() error { return db.Tx(ctx, func(*Tx) error { return nil }) },
	}
	for name, op := range ops {
		err := op()
		if fe, ok := errors.AsType[*flashsale.Error](err); !ok || fe.Code != flashsale.EUnavailable || fe.RetryAfter < time.Second {
			t.Errorf("%s with the server down = %v; want unavailable with a Retry-After", name, err)
		}
	}
}
