package admission_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkWaitingMemory joins 1,000,000 buyers to one waiting room (the
// real join, 64 at a time) and reports Redis's used_memory growth, in MB
// and bytes per ticket; b.N is ignored (run it with -benchtime=1x). The
// figure is meaningful on a Redis nobody else writes meanwhile.
func BenchmarkWaitingMemory(b *testing.B) {
	const tickets = 1_000_000
	e := newEnv(b, 1000, 1000, time.Hour)
	before := usedMemory(b, e)
	b.ResetTimer()
	sem := make(chan struct{}, 64)
	errs := make(chan error, 64)
	for u := 1; u <= tickets; u++ {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			if _, err := e.q.Join(context.Background(), e.v.ID, int64(u)); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	s, err := e.q.Stats(e.ctx, e.v.ID)
	if err != nil || s.Waiting != tickets {
		b.Fatalf("waiting %d, %v", s.Waiting, err)
	}
	grown := usedMemory(b, e) - before
	b.ReportMetric(float64(grown)/1e6, "MB/1M-tickets")
	b.ReportMetric(float64(grown)/tickets, "bytes/ticket")
}

func usedMemory(b *testing.B, e *env) int64 {
	info, err := e.client.Do(e.ctx, e.client.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}
