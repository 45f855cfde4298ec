package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/flashsale/auth"
)

// TestWatchAuth: a refused token is counted under its reason's label, a
// verified one as a cached token.
func TestWatchAuth(t *testing.T) {
	a, err := auth.New(strings.Repeat("s", 32), "")
	if err != nil {
		t.Fatal(err)
	}
	m := New("conditional")
	m.WatchAuth(a)
	tok, _ := a.UserToken(1, 3600e9)
	if _, err := a.User(tok); err != nil {
		t.Fatal(err)
	}
	_, _ = a.User("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.") // alg none
	want := `
# HELP flashsale_auth_cached_tokens Verified tokens in the token cache.
# TYPE flashsale_auth_cached_tokens gauge
flashsale_auth_cached_tokens 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "flashsale_auth_cached_tokens"); err != nil {
		t.Fatal(err)
	}
	out, err := testutil.GatherAndCount(m.reg, "flashsale_auth_refused_total")
	if err != nil || out < 10 {
		t.Fatalf("flashsale_auth_refused_total: %d series, %v; want one per reason", out, err)
	}
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "flashsale_auth_refused_total" {
			for _, mt := range mf.GetMetric() {
				got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
			}
		}
	}
	if got["alg_none"] != 1 || got["expired"] != 0 {
		t.Fatalf("flashsale_auth_refused_total = %v; want alg_none 1, the others 0", got)
	}
}
