package lab_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/flashsale/flashsale/lab"
)

// BenchmarkLoad measures the load generator itself against a server that
// does nothing: the most requests per second the lab can send from this
// machine, to set beside the ceiling_rps it measures on GET /healthz.
func BenchmarkLoad(b *testing.B) {
	for _, concurrency := range []int{50, 200} {
		b.Run(fmt.Sprintf("closed/concurrency=%d", concurrency), func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, `{"status":"ok"}`)
			}))
			defer srv.Close()
			shots, err := lab.Plan(max(b.N, 1), max(b.N, 1), 0, 1)
			if err != nil {
				b.Fatal(err)
			}
			l := &lab.Load{Targets: []string{srv.URL}, Shots: shots, NewRequest: lab.HealthzRequest, Concurrency: concurrency}
			b.ResetTimer()
			res, err := l.Run(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if res.Errors > 0 {
				b.Fatalf("%d transport errors: %v", res.Errors, res.ErrorSamples)
			}
			b.ReportMetric(res.RPS(), "req/s")
		})
	}
}
