package store

import (
	"sync"
	"testing"
)

// TestBuyerNumber: a pair is numbered once, whoever asks first among
// concurrent callers, and keeps its number; pairs that differ in case, a
// trailing space, a leading zero or their issuer are numbered apart.
func TestBuyerNumber(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		const iss = "https://id.example.com/realms/shop"
		pairs := [][2]string{
			{iss, "abc"}, {iss, "ABC"}, {iss, "abc "}, {iss, "123"}, {iss, "0123"},
			{iss, "auth0|5f1a"}, {iss + "/", "abc"}, {"https://other.example.com", "abc"},
		}
		const callers = 4
		got := make([][callers]int64, len(pairs))
		var wg sync.WaitGroup
		for i, p := range pairs {
			for c := range callers {
				wg.Go(func() {
					n, err := db.BuyerNumber(t.Context(), p[0], p[1])
					if err != nil {
						t.Errorf("BuyerNumber%q: %v", p, err)
					}
					got[i][c] = n
				})
			}
		}
		wg.Wait()
		seen := map[int64][2]string{}
		for i, p := range pairs {
			n := got[i][0]
			for c := range callers {
				if got[i][c] != n || n <= 0 {
					t.Fatalf("BuyerNumber%q = %v; want one positive number for every caller", p, got[i])
				}
			}
			if q, ok := seen[n]; ok {
				t.Fatalf("BuyerNumber%q = BuyerNumber%q = %d; want two numbers", p, q, n)
			}
			seen[n] = p
			if again, err := db.BuyerNumber(t.Context(), p[0], p[1]); err != nil || again != n {
				t.Fatalf("BuyerNumber%q again = %d, %v; want %d", p, again, err, n)
			}
		}
	})
}
