package store

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestPersistOrdersRetriesASnapshotConflict: on MariaDB with
// innodb_snapshot_isolation=ON (the default from MariaDB 11.6.2), a
// PersistOrders that loses a race on the voucher row gets error 1020
// "Record has changed since last read": a conflict to retry, like a
// deadlock, not an internal error.
func TestPersistOrdersRetriesASnapshotConflict(t *testing.T) {
	db := openDB(t, dialects[0].url(t)+"?innodb_snapshot_isolation=ON")
	createVoucher(t, db, 1, 10)
	locked := make(chan struct{})
	release := make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- db.Tx(context.Background(), func(tx *Tx) error {
			o := batch(1, 1)[0]
			if err := tx.InsertOrder(context.Background(), &o, 1); err != nil {
				return err
			}
			if _, err := tx.DecrementRemaining(context.Background(), 1, 1); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	done := make(chan error, 1)
	var res flashsale.PersistResult
	go func() {
		var err error
		res, err = db.PersistOrders(context.Background(), batch(1, 2)) // another user: no overlap
		done <- err
	}()
	waitForStatement(t, db, "UPDATE vouchers%")
	close(release)
	if err := <-txDone; err != nil {
		t.Fatal(err)
	}
	err := <-done
	t.Logf("PersistOrders: %+v, code %q, err %v", res, flashsale.ErrorCode(err), err)
	if err != nil {
		t.Errorf("PersistOrders of a disjoint batch failed after losing a row race: code %q (want success, or at least %q): %v",
			flashsale.ErrorCode(err), flashsale.EBusy, err)
	}
}

func waitForStatement(t *testing.T, db *DB, like string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := db.writer.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND INFO LIKE ?`, like).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("statement not seen")
}
