package lab_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/lab"
)

// TestSoldOutIsWhenTheFirstBuyerHeardIt: a Load notes when the first
// sold_out answer arrived, from its start; with none, nothing. One request
// at a time, so the server's clock brackets it: after the server sent the
// first sold_out (less the time before the first request arrived), before
// the next request arrived.
func TestSoldOutIsWhenTheFirstBuyerHeardIt(t *testing.T) {
	for _, stock := range []int{5, 10} {
		t.Run(fmt.Sprintf("stock %d of 10", stock), func(t *testing.T) {
			var (
				mu                       sync.Mutex
				seen                     int
				first, soldOut, nextSeen time.Time
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				seen++
				switch {
				case seen == 1:
					first = time.Now()
				case seen == stock+2:
					nextSeen = time.Now()
				}
				if seen <= stock {
					fmt.Fprintf(w, `{"order_id":"%d","status":"created"}`, 1000+seen)
					return
				}
				if seen == stock+1 {
					soldOut = time.Now()
				}
				w.WriteHeader(http.StatusConflict)
				fmt.Fprint(w, `{"error":{"code":"sold_out","message":"sold out"}}`)
			}))
			defer srv.Close()
			shots, err := lab.Plan(10, 10, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			res, err := (&lab.Load{Targets: []string{srv.URL}, Shots: shots, NewRequest: lab.OrderRequest(42, token), Concurrency: 1}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if stock == 10 {
				if res.SoldOut != 0 {
					t.Errorf("SoldOut %v with no sold_out answer, want 0", res.SoldOut)
				}
				return
			}
			if lo, hi := soldOut.Sub(first), nextSeen.Sub(before); res.SoldOut < lo || res.SoldOut > hi || res.SoldOut > res.Elapsed {
				t.Errorf("SoldOut %v, want within [%v, %v] and the run's %v", res.SoldOut, lo, hi, res.Elapsed)
			}
		})
	}
}
