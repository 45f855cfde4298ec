package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

func TestBusyWhenTheBuyersLockIsHeld(t *testing.T) {
	api := newTestAPI(t, apiOptions{strategy: "lock", lockWait: 50 * time.Millisecond})
	vid := api.createVoucher(5)
	held, err := api.locks.Mutex(fmt.Sprintf("order:%s:%d", vid, 7)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var eb errorBody
	res := api.do("POST", "/api/vouchers/"+vid+"/orders", api.userToken(7), "", &eb)
	wantError(t, res, eb, http.StatusServiceUnavailable, flashsale.EBusy)
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("busy without Retry-After")
	}
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	var placed struct{ Status string }
	if res := api.do("POST", "/api/vouchers/"+vid+"/orders", api.userToken(7), "", &placed); res.StatusCode != 200 || placed.Status != "created" {
		t.Fatalf("after the lock was released: %d %+v", res.StatusCode, placed)
	}
}

// TestConcurrentSale runs a sale of stock 100 to 1,000 buyers who each
// click three times, two of the clicks at the same instant, and checks the
// outcome in the database.
func TestConcurrentSale(t *testing.T) {
	for _, name := range []string{"conditional", "lock"} {
		t.Run(name, func(t *testing.T) {
			const users, clicks, stock = 1000, 3, 100
			api := newTestAPI(t, apiOptions{strategy: name})
			vid := api.createVoucher(stock)
			tokens := make([]string, users)
			for i := range tokens {
				tokens[i] = api.userToken(int64(i + 1))
			}
			var (
				mu       sync.Mutex
				statuses = map[int]int{}
				accepted = map[string]bool{}
			)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			sem := make(chan struct{}, 64)
			var wg sync.WaitGroup
			for round := range clicks {
				for u := range users {
					// Two of a buyer's clicks go out together (a double click).
					n := 1
					if round == 0 {
						n = 2
					}
					for range n {
						wg.Add(1)
						sem <- struct{}{}
						go func() {
							defer wg.Done()
							defer func() { <-sem }()
							status, orderID := placeOrder(t, client, api.url, vid, tokens[u])
							mu.Lock()
							defer mu.Unlock()
							statuses[status]++
							if status == http.StatusOK {
								if accepted[orderID] {
									t.Errorf("order id %s handed out twice", orderID)
								}
								accepted[orderID] = true
							}
						}()
					}
				}
			}
			wg.Wait()
			for status, n := range statuses {
				if status >= 500 {
					t.Errorf("%d responses with status %d", n, status)
				}
			}
			a, err := api.db.AuditVoucher(context.Background(), mustID(t, vid))
			if err != nil {
				t.Fatal(err)
			}
			if len(accepted) != stock || statuses[http.StatusOK] != stock || a.Orders != stock || a.DistinctBuyers != stock || a.DuplicateBuyers != 0 || a.Remaining != 0 {
				t.Fatalf("statuses %v, accepted %d; audit %+v; want exactly %d orders, %d buyers, none left", statuses, len(accepted), a, stock, stock)
			}
			for id := range accepted {
				if _, err := api.db.FindOrder(context.Background(), mustID(t, id)); err != nil {
					t.Fatalf("accepted order %s is not in the database: %v", id, err)
				}
			}
		})
	}
}

func placeOrder(t *testing.T, c *http.Client, base, vid, token string) (int, string) {
	req, err := http.NewRequest("POST", base+"/api/vouchers/"+vid+"/orders", nil)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer res.Body.Close()
	var out struct {
		OrderID string `json:"order_id"`
	}
	if res.StatusCode == http.StatusOK {
		if err := decode(res, &out); err != nil {
			t.Error(err)
		}
	}
	return res.StatusCode, out.OrderID
}
