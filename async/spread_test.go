package async_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/idempotency"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/hashslot"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestShardedSaleKeysInShardSlots sells a voucher of 3 shards on the
// shared cluster to 1,200 buyers clicking twice at once (a third of them
// with an Idempotency-Key, through the idempotency wrapper as serve
// wires it), and checks, while the orders are pending and again once the
// consumer persisted them, that every key under the prefix is in a slot
// of one of the voucher's shards, but for the keys no order writes (the
// registry, the epochs, the owner, heartbeats, the voucher ids' range);
// and that each order is found by its id alone, pending and persisted.
func TestShardedSaleKeysInShardSlots(t *testing.T) {
	t.Parallel()
	c := testenv.SharedCluster(t)
	e := envOnCluster(t, c)
	v := e.windowVoucher(600, 10*time.Minute, 1, 3)
	keyed := idempotency.Wrap(e.Svc, e.Client, idempotency.Config{Prefix: e.Prefix, HashTag: e.Svc.BuyerHashTag})
	var accepted []*flashsale.Order
	for _, o := range sellKeyed(t, keyed, v.ID, asynctest.Users(1, 1200)) {
		accepted = append(accepted, o)
	}
	if len(accepted) != v.Stock {
		t.Fatalf("%d orders accepted of a stock of %d", len(accepted), v.Stock)
	}
	shardSlots := map[int]bool{}
	for _, vk := range e.Keys.Shards(v.ID, 3) {
		shardSlots[vk.Slot] = true
	}
	if len(shardSlots) != 3 {
		t.Fatalf("the 3 shards share slots: %v", shardSlots)
	}
	checkKeysInSlots(t, e, c, shardSlots)
	checkFound(t, e, accepted, flashsale.StatusPending)

	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, len(accepted))
	checkKeysInSlots(t, e, c, shardSlots)
	checkFound(t, e, accepted, flashsale.StatusAwaitingPayment) // from MySQL now
}

// sellKeyed has each user click twice at once, every third one with an
// Idempotency-Key, and returns the accepted orders by user.
func sellKeyed(t *testing.T, svc flashsale.OrderService, voucherID int64, users []int64) map[int64]*flashsale.Order {
	t.Helper()
	out := map[int64]*flashsale.Order{}
	results := make(chan *flashsale.Order, 2*len(users))
	sem := make(chan struct{}, 128)
	for _, u := range users {
		for range 2 {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				req := flashsale.OrderRequest{VoucherID: voucherID, UserID: u}
				if u%3 == 0 {
					req.IdempotencyKey = fmt.Sprintf("k%d", u)
				}
				o, err := svc.PlaceOrder(context.Background(), req)
				switch asynctest.Code(err) {
				case "":
				case flashsale.ESoldOut, flashsale.EDuplicateOrder, flashsale.EBusy:
					o = nil
				default:
					t.Errorf("PlaceOrder(user %d): %v", u, err)
					o = nil
				}
				results <- o
			}()
		}
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	close(results)
	for o := range results {
		if o == nil {
			continue
		}
		if prev, ok := out[o.UserID]; ok && prev.ID != o.ID {
			t.Errorf("user %d got orders %d and %d", o.UserID, prev.ID, o.ID)
		}
		out[o.UserID] = o
	}
	return out
}

// checkKeysInSlots fails the test for every key under the prefix, on any
// master, outside the slots, but for the keys no order writes.
func checkKeysInSlots(t *testing.T, e *env, c *testenv.Cluster, slots map[int]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	voucherIDs := e.Prefix + "idgen:{" + hashslot.Tag(hashslot.Of("order")) + "}:order" // CreateVoucher's id
	var outside []string
	n := 0
	for _, m := range c.Masters() {
		client := m.Client(t)
		var cursor uint64
		for {
			s, err := client.Do(ctx, client.B().Scan().Cursor(cursor).Match(e.Prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range s.Elements {
				n++
				rest := strings.TrimPrefix(k, e.Prefix)
				switch {
				case slots[hashslot.Of(k)], k == voucherIDs, slices.Contains([]string{"vouchers", "epoch", "epochs", "owner", "retiring"}, rest),
					strings.HasPrefix(rest, "alive:"), strings.HasPrefix(rest, "{e") && strings.HasSuffix(rest, "}:epoch"):
				default:
					outside = append(outside, k)
				}
			}
			if cursor = s.Cursor; cursor == 0 {
				break
			}
		}
	}
	if n < 100 {
		t.Errorf("only %d keys under the prefix: the scan missed the sale's", n)
	}
	if len(outside) > 0 {
		t.Errorf("%d of %d keys outside the shards' slots: %v", len(outside), n, outside[:min(len(outside), 20)])
	}
}

// checkFound checks that each order is found by its id with the status,
// and that its id carries the slot of one of its voucher's shards.
func checkFound(t *testing.T, e *env, orders []*flashsale.Order, status flashsale.OrderStatus) {
	t.Helper()
	for _, o := range orders {
		got, err := e.Svc.FindOrder(context.Background(), o.ID)
		if err != nil || got.ID != o.ID || got.UserID != o.UserID || got.Status != status {
			t.Fatalf("FindOrder(%d) = %+v, %v; want user %d, %s", o.ID, got, err, o.UserID, status)
		}
		if _, ok := idgen.Slot(o.ID); !ok {
			t.Fatalf("order id %d carries no slot", o.ID)
		}
	}
}
