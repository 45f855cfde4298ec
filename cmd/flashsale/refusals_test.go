package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestPassRefusalsCountedApart: on a queue voucher, an order without a
// pass, one with a bad pass and one by a user on the deny list are
// counted in flashsale_orders_total as pass_required, pass_invalid and
// denied, not invalid, and the dashboard's refusals per second name
// them so.
func TestPassRefusalsCountedApart(t *testing.T) {
	url, _ := startServe(t, "--strategy", "conditional", "--public-metrics")
	var v struct{ ID string }
	body := fmt.Sprintf(`{"title":"q","stock":5,"begin_time":%q,"end_time":%q,"admission":"queue","admit_per_second":10}`,
		time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, body, &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	if code := call(t, "PUT", url+"/api/denylist", serveAdmin, `{"users":["9"],"ips":[]}`, nil); code != http.StatusOK {
		t.Fatalf("deny list: %d", code)
	}
	order := func(user int64, pass, want string) {
		req, _ := http.NewRequest("POST", url+"/api/vouchers/"+v.ID+"/orders", nil)
		req.Header.Set("Authorization", "Bearer "+userToken(t, user))
		if pass != "" {
			req.Header.Set("Flashsale-Pass", pass)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("user %d's order, want %s: %d", user, want, res.StatusCode)
		}
	}
	order(1, "", "pass_required")
	order(2, "x.y.z", "pass_invalid")
	order(2, "1.2.3", "pass_invalid")
	order(9, "", "denied")
	metrics := get(t, url+"/metrics")
	for outcome, want := range map[string]string{"pass_required": "1", "pass_invalid": "2", "denied": "1", "invalid": "0"} {
		re := regexp.MustCompile(`flashsale_orders_total\{outcome="` + outcome + `",strategy="conditional"\} (\d+)`)
		if m := re.FindStringSubmatch(metrics); m == nil || m[1] != want {
			t.Errorf("flashsale_orders_total{outcome=%q}: %v, want %s", outcome, m, want)
		}
	}
	var stats struct {
		Rates    struct{ Refused map[string]float64 }
		Outcomes []string
	}
	for deadline := time.Now().Add(20 * time.Second); call(t, "GET", url+"/api/vouchers/"+v.ID+"/stats", "", "", &stats) != http.StatusOK; {
		if time.Now().After(deadline) {
			t.Fatal("the voucher's stats never answered 200")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, o := range []string{"pass_required", "pass_invalid", "denied"} {
		if !strings.Contains(strings.Join(stats.Outcomes, ","), o) {
			t.Errorf("the dashboard's outcomes %v lack %s", stats.Outcomes, o)
		}
	}
	if stats.Rates.Refused["invalid"] != 0 {
		t.Errorf("the dashboard counts pass refusals as invalid: %v", stats.Rates.Refused)
	}
}
