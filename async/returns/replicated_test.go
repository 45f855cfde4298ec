package returns_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestRestockReplicatedWaitsForTheReplica: in durability replica a return
// fails while the replica acknowledges nothing (the sweep runs it again),
// also when run again after its units went back on the primary, and once
// the replica runs again the return is done and the replica has it.
func TestRestockReplicatedWaitsForTheReplica(t *testing.T) {
	primary, rep := testenv.StartReplicated(t)
	dsn, url := asynctest.MySQLDatabase(t)
	e := asynctest.NewOn(t, primary.Client(t), testenv.Unique()+":", dsn, url)
	rc := rep.Client(t)
	ctx := context.Background()
	v := &flashsale.Voucher{Title: "t", Stock: 5, PaymentWindowSeconds: 600,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := e.Svc.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	orders := e.Buy(v.ID, 1, 2)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 2)
	closed, _, err := e.DB.CancelOrder(ctx, orders[0].ID, orders[0].UserID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	cfg.Durability = async.DurabilityConfig{Mode: async.DurabilityReplica, MinReplicas: 1, ReplicaTimeout: 100 * time.Millisecond}
	r := async.Returns(e.Client, cfg)

	rep.Pause()
	defer rep.Resume()
	// Twice: the second finds the units back already and writes nothing,
	// yet its WAIT still covers the first's write.
	for i := range 2 {
		if err := r.Restock(ctx, []*flashsale.Order{closed}); err == nil || !strings.Contains(err.Error(), "0 of 1 replicas acknowledged") {
			t.Fatalf("Restock %d with the replica stopped = %v; want 0 of 1 replicas acknowledged", i+1, err)
		}
	}
	rep.Resume()
	cfg.Durability.ReplicaTimeout = 10 * time.Second // what a loaded machine's replica meets
	if err := async.Returns(e.Client, cfg).Restock(ctx, []*flashsale.Order{closed}); err != nil {
		t.Fatalf("Restock once the replica runs = %v", err)
	}
	stock, err := rc.Do(ctx, rc.B().Hget().Key(e.Keys.Voucher(v.ID).Meta).Field(layout.FieldStock).Build()).AsInt64()
	if err != nil || stock != 4 {
		t.Errorf("the replica's stock = %d, %v; want 4: 5 - 2 sold + 1 returned, once", stock, err)
	}
}
