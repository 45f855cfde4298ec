package lab_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/lab"
)

// token is the fake bearer token of a user in these tests.
func token(user int64) string { return "u" + strconv.FormatInt(user, 10) }

// userOf reads the user from a fake token.
func userOf(r *http.Request) int64 {
	u, _ := strconv.ParseInt(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer u"), 10, 64)
	return u
}

// kind says how the fake server answers a user: accept, refuse as sold
// out, answer 503 with a body that is not JSON, or drop the connection.
func kind(user int64) int { return int(user % 4) }

// answerByUser answers every request of a user the same way (see kind).
func answerByUser(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	switch kind(u) {
	case 0:
		fmt.Fprintf(w, `{"order_id":"%d","status":"created"}`, 1000+u)
	case 1:
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error":{"code":"sold_out","message":"sold out"}}`)
	case 2:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "upstream gone")
	default:
		panic(http.ErrAbortHandler) // the client sees the connection close: a transport error
	}
}

// TestLoadCountsAnswers checks that every request of the plan is sent and
// every answer is counted where it belongs, in both models.
func TestLoadCountsAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(answerByUser))
	defer srv.Close()
	srv2 := httptest.NewServer(http.HandlerFunc(answerByUser))
	defer srv2.Close()
	shots, err := lab.Plan(40, 130, 0.3, 7)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		accepted, soldOut, http503, errors int
		ids                                []int64
		refused                            []int64
	}
	for _, s := range shots {
		switch kind(s.User) {
		case 0:
			want.accepted += s.Clicks
			for range s.Clicks {
				want.ids = append(want.ids, 1000+s.User)
			}
		case 1:
			want.soldOut += s.Clicks
		case 2:
			want.http503 += s.Clicks
		default:
			want.errors += s.Clicks
		}
	}
	for u := int64(1); u <= 40; u++ {
		if kind(u) != 0 { // refused, or left without an answer
			want.refused = append(want.refused, u)
		}
	}
	slices.Sort(want.ids)
	for _, rate := range []float64{0, 4000} {
		t.Run(fmt.Sprintf("rate %g", rate), func(t *testing.T) {
			l := &lab.Load{
				Targets:     []string{srv.URL, srv2.URL},
				Shots:       shots,
				NewRequest:  lab.OrderRequest(42, token),
				Concurrency: 8,
				Rate:        rate,
			}
			res, err := l.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ids := slices.Sorted(slices.Values(res.OrderIDs))
			if res.Requests != 130 || res.Accepted != want.accepted || res.Errors != want.errors ||
				res.Rejected["sold_out"] != want.soldOut || res.Rejected["http_503"] != want.http503 || len(res.Rejected) != 2 {
				t.Errorf("requests %d accepted %d rejected %v errors %d; want 130, %d, sold_out=%d http_503=%d, %d",
					res.Requests, res.Accepted, res.Rejected, res.Errors, want.accepted, want.soldOut, want.http503, want.errors)
			}
			if !slices.Equal(ids, want.ids) || !slices.Equal(res.TurnedAway, want.refused) {
				t.Errorf("order ids %v turned away %v; want %v and %v", ids, res.TurnedAway, want.ids, want.refused)
			}
			if got := res.Latency.TotalCount(); got != int64(130-want.errors) {
				t.Errorf("latency histogram holds %d answers, want %d", got, 130-want.errors)
			}
			if len(res.ErrorSamples) == 0 {
				t.Error("no transport error kept as a sample")
			}
		})
	}
}

// TestAcceptedOrderWithoutAnIDIsAnError: an order answer that says yes
// but names no order could never be checked for loss, so it is counted as
// an error, not as accepted; a /healthz answer needs no id.
func TestAcceptedOrderWithoutAnIDIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"created"}`)
	}))
	defer srv.Close()
	shots, err := lab.Plan(5, 10, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name             string
		orders           bool
		accepted, errors int
	}{
		{"order answers", true, 0, 10},
		{"other answers", false, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &lab.Load{Targets: []string{srv.URL}, Shots: shots, NewRequest: lab.OrderRequest(42, token), Concurrency: 2, Orders: tt.orders}
			res, err := l.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Accepted != tt.accepted || res.Errors != tt.errors {
				t.Fatalf("accepted %d, errors %d; want %d and %d", res.Accepted, res.Errors, tt.accepted, tt.errors)
			}
		})
	}
}

// TestTimeoutsCountInTheLatency: requests the server never answers in
// time are errors, and their wait is in the latency histogram, so a stall
// shows in the tail instead of vanishing from it.
func TestTimeoutsCountInTheLatency(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("Authorization"), " u1") {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		fmt.Fprint(w, `{"order_id":"7","status":"created"}`)
	}))
	defer srv.Close()
	shots, err := lab.Plan(4, 8, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 1500 * time.Millisecond // the slow handler holds 5s
	l := &lab.Load{Targets: []string{srv.URL}, Shots: shots, NewRequest: lab.OrderRequest(42, token),
		Concurrency: 8, Client: lab.NewClient(8, timeout), Orders: true}
	res, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// User 1's two clicks time out; the other six are answered at once.
	if res.Errors != 2 || res.Accepted != 6 || res.Latency.TotalCount() != 8 {
		t.Fatalf("errors %d, accepted %d, latencies %d; want 2, 6, 8", res.Errors, res.Accepted, res.Latency.TotalCount())
	}
	if maxMs := res.LatencyMs(100); maxMs < float64(timeout.Milliseconds()) {
		t.Fatalf("max latency %.1f ms, want at least the %s the timed-out requests waited", maxMs, timeout)
	}
}

// TestLoadSpreadsRoundRobin checks that consecutive requests go to the
// targets in turn, as a load balancer sends them.
func TestLoadSpreadsRoundRobin(t *testing.T) {
	var (
		mu   sync.Mutex
		hits = map[string]int{}
	)
	h := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[name]++
			mu.Unlock()
			fmt.Fprint(w, `{"status":"ok"}`)
		})
	}
	a, b, c := httptest.NewServer(h("a")), httptest.NewServer(h("b")), httptest.NewServer(h("c"))
	defer a.Close()
	defer b.Close()
	defer c.Close()
	shots, err := lab.Plan(30, 90, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := &lab.Load{Targets: []string{a.URL, b.URL, c.URL}, Shots: shots, NewRequest: lab.HealthzRequest, Concurrency: 4}
	res, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if hits["a"] != 30 || hits["b"] != 30 || hits["c"] != 30 || res.Accepted != 90 {
		t.Errorf("hits %v accepted %d; want 30 per target and 90 accepted", hits, res.Accepted)
	}
}

// TestDoubleClicksAreConcurrent makes every shot a double click and has
// the server hold each request until the other click of its buyer arrives:
// with two slots, the run only completes if both clicks of a shot are in
// flight together.
func TestDoubleClicksAreConcurrent(t *testing.T) {
	var (
		mu      sync.Mutex
		waiting = map[int64]chan struct{}{}
		met     = map[int64]bool{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := userOf(r)
		mu.Lock()
		ch, second := waiting[u]
		if second {
			met[u] = true
			close(ch)
		} else {
			ch = make(chan struct{})
			waiting[u] = ch
		}
		mu.Unlock()
		select {
		case <-ch:
			fmt.Fprintf(w, `{"order_id":"%d"}`, u)
		case <-time.After(10 * time.Second): // not released together: fail, do not hang
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error":{"code":"alone"}}`)
		}
	}))
	defer srv.Close()
	shots, err := lab.Plan(25, 50, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shots {
		if s.Clicks != 2 {
			t.Fatalf("plan with double-click chance 1 has a shot of %d clicks", s.Clicks)
		}
	}
	l := &lab.Load{Targets: []string{srv.URL}, Shots: shots, NewRequest: lab.OrderRequest(1, token), Concurrency: 2}
	res, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 50 || len(met) != 25 {
		t.Errorf("accepted %d, buyers whose clicks met %d, rejected %v; want 50 and 25", res.Accepted, len(met), res.Rejected)
	}
}

// TestOpenModelMeasuresFromSchedule sends requests on a 1ms schedule to a
// server that answers one at a time in at least 20ms: request k is due at
// k ms but cannot be answered before (k+1)·20ms, so measured from its
// schedule it takes at least 19k+20 ms. A load generator that measured
// from the actual send would report about 20ms for every request.
func TestOpenModelMeasuresFromSchedule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		fmt.Fprint(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	shots, err := lab.Plan(10, 10, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := &lab.Load{Targets: []string{srv.URL}, Shots: shots, NewRequest: lab.HealthzRequest, Concurrency: 1, Rate: 1000}
	res, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 10 {
		t.Fatalf("accepted %d, want 10", res.Accepted)
	}
	// The 5th and the 10th fastest of the lower bounds 19k+20 (k = 0…9).
	if p50, maxMs := res.LatencyMs(50), res.MaxLatencyMs(); p50 < 96 || maxMs < 191 {
		t.Errorf("p50 %.1fms, max %.1fms; want at least 96ms and 191ms, measured from the schedule", p50, maxMs)
	}
}

// TestOpenModelKeepsTheSchedule checks that the open model does not send
// faster than its rate: 20 requests at 200/s take at least 95ms.
func TestOpenModelKeepsTheSchedule(t *testing.T) {
	var (
		mu   sync.Mutex
		last time.Time
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = time.Now()
		mu.Unlock()
		fmt.Fprint(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	shots, err := lab.Plan(20, 20, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := &lab.Load{Targets: []string{srv.URL}, Shots: shots, NewRequest: lab.HealthzRequest, Concurrency: 4, Rate: 200}
	start := time.Now()
	res, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 20 || last.Sub(start) < 95*time.Millisecond {
		t.Errorf("accepted %d, last request arrived %s after the start; want 20 and at least 95ms (19 intervals of 5ms)", res.Accepted, last.Sub(start))
	}
}

// TestLoadStopsWhenCancelled checks that a cancelled run stops sending
// and returns what was answered with the context's error.
func TestLoadStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu sync.Mutex
		n  int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		if n == 10 {
			cancel()
		}
		mu.Unlock()
		fmt.Fprint(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	shots, err := lab.Plan(1000, 1000, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := &lab.Load{Targets: []string{srv.URL}, Shots: shots, NewRequest: lab.HealthzRequest, Concurrency: 2}
	res, err := l.Run(ctx)
	if !errors.Is(err, context.Canceled) || res == nil || res.Requests >= 1000 || res.Requests < 10 {
		t.Fatalf("Run = %+v, %v; want a partial result and context.Canceled", res, err)
	}
}

// TestLoadWaves: once its shots are sent the Load asks More for the next
// wave until it gives none, tells Accepted of every accepted order, and
// sends each shot's quantity as the body; it counts every wave's answers
// in one Result.
func TestLoadWaves(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies[string(b)]++
		mu.Unlock()
		if u := userOf(r); u%2 == 0 {
			fmt.Fprintf(w, `{"order_id":"%d","status":"awaiting_payment"}`, 1000+u)
			return
		}
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error":{"code":"sold_out"}}`)
	}))
	defer srv.Close()
	waves := 0
	var accepted []int64
	l := &lab.Load{Targets: []string{srv.URL}, Shots: []lab.Shot{{User: 1, Clicks: 1}, {User: 2, Clicks: 2, Quantity: 2}},
		NewRequest: lab.OrderRequest(42, token), Concurrency: 2, Orders: true, Rate: 1000,
		More: func(ctx context.Context) []lab.Shot {
			if waves++; waves > 2 {
				return nil
			}
			return []lab.Shot{{User: 3, Clicks: 1, Quantity: 3}, {User: 4, Clicks: 1}}
		},
		Accepted: func(shot lab.Shot, id int64) {
			mu.Lock()
			defer mu.Unlock()
			accepted = append(accepted, id)
		}}
	res, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(accepted)
	if res.Requests != 7 || res.Accepted != 4 || res.Rejected["sold_out"] != 3 || waves != 3 ||
		!slices.Equal(accepted, []int64{1002, 1002, 1004, 1004}) || !slices.Equal(res.TurnedAway, []int64{1, 3}) ||
		res.TurnedAwayUnits[1] != 1 || res.TurnedAwayUnits[3] != 3 {
		t.Errorf("result %+v, waves %d, accepted %v", res, waves, accepted)
	}
	if want := map[string]int{"": 3, `{"quantity":2}`: 2, `{"quantity":3}`: 2}; !maps.Equal(bodies, want) {
		t.Errorf("bodies %v, want %v", bodies, want)
	}
}
