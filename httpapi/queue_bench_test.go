package httpapi_test

import (
	"net/http"
	"testing"
	"time"
)

// BenchmarkQueue measures joins and polls of a waiting room through HTTP
// against order attempts of the async sale shape (stock 1,000, every buyer
// clicking five times; BenchmarkHotVoucher's async/sale) on the same
// server in the same run, alternating in benchRounds rounds: attempts/s,
// joins/s (every join a new buyer, whose token is verified afresh),
// shape-joins/s (the sale's shape: every buyer joining five times, as
// they click), polls/s (cycling over 1,000 tickets), and each one's ratio
// to attempts/s.
func BenchmarkQueue(b *testing.B) {
	api := newTestAPI(b, apiOptions{strategy: "async"})
	sale := api.createVoucher(1000)
	room := api.createQueueVoucher(100_000_000, 100_000)
	users := max(b.N/5, 1)
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = api.userToken(int64(i + 1))
	}
	joiners := make([]string, b.N)
	for i := range joiners {
		joiners[i] = api.userToken(int64(10_000_000 + i))
	}
	clickers := make([]string, users)
	for i := range clickers {
		clickers[i] = api.userToken(int64(30_000_000 + i))
	}
	tickets := make([]string, 1000)
	for i := range tickets {
		tickets[i] = api.join(room, int64(20_000_000+i)).Ticket
	}
	pollTokens := make([]string, len(tickets))
	for i := range pollTokens {
		pollTokens[i] = api.userToken(int64(20_000_000 + i))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency, MaxConnsPerHost: benchConcurrency}}
	request := func(method, path, token string) (*http.Request, error) {
		req, err := http.NewRequest(method, api.url+path, nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return req, err
	}
	order := func(i int) (*http.Request, error) {
		return request("POST", "/api/vouchers/"+sale+"/orders", tokens[i%users])
	}
	join := func(i int) (*http.Request, error) { return request("POST", "/api/vouchers/"+room+"/queue", joiners[i]) }
	click := func(i int) (*http.Request, error) {
		return request("POST", "/api/vouchers/"+room+"/queue", clickers[i%users])
	}
	poll := func(i int) (*http.Request, error) {
		k := i % len(tickets)
		return request("GET", "/api/vouchers/"+room+"/queue/"+tickets[k], pollTokens[k])
	}
	var orderTime, joinTime, clickTime, pollTime time.Duration
	b.ResetTimer()
	for r := range benchRounds {
		from, to := r*b.N/benchRounds, (r+1)*b.N/benchRounds
		for _, phase := range []struct {
			req func(int) (*http.Request, error)
			sum *time.Duration
		}{{order, &orderTime}, {join, &joinTime}, {click, &clickTime}, {poll, &pollTime}} {
			start := time.Now()
			hammerHTTP(b, client, from, to, phase.req)
			*phase.sum += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(n/orderTime.Seconds(), "attempts/s")
	b.ReportMetric(n/joinTime.Seconds(), "joins/s")
	b.ReportMetric(n/clickTime.Seconds(), "shape-joins/s")
	b.ReportMetric(n/pollTime.Seconds(), "polls/s")
	b.ReportMetric(orderTime.Seconds()/joinTime.Seconds(), "join/attempt")
	b.ReportMetric(orderTime.Seconds()/clickTime.Seconds(), "shape-join/attempt")
	b.ReportMetric(orderTime.Seconds()/pollTime.Seconds(), "poll/attempt")
}
