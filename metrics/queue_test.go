package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/flashsale/admission"
)

// rooms is a QueueReader answering what the test set.
type rooms struct {
	mu    sync.Mutex
	stats []admission.Stats
	err   error
}

func (r *rooms) set(s []admission.Stats, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats, r.err = s, err
}

func (r *rooms) AllStats(context.Context) ([]admission.Stats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]admission.Stats(nil), r.stats...), r.err
}

// TestWatchQueue checks a sample: newest voucher first, at most maxRooms
// of them, every gauge and counter per voucher in the scrape; a failed
// read keeps the last sample.
func TestWatchQueue(t *testing.T) {
	m := New("async")
	if m.QueueStats() != nil {
		t.Fatal("QueueStats without WatchQueue: want nil")
	}
	r := &rooms{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := m.WatchQueue(ctx, r, nil)
	var many []admission.Stats
	for id := int64(1); id <= maxRooms+5; id++ {
		many = append(many, admission.Stats{VoucherID: id, Waiting: 10 * id, Unused: id, Admitted: 100 + id,
			Expired: 2, AdmittedLastSecond: 3, ETASeconds: new(int64(7)), Rate: 50, UnitsAhead: 4})
	}
	r.set(many, nil)
	w.sample(ctx, nil)
	got := m.QueueStats()
	if len(got) != maxRooms || got[0].VoucherID != maxRooms+5 || got[maxRooms-1].VoucherID != 6 {
		t.Fatalf("sampled %d rooms from %d to %d, want %d from %d to 6", len(got), got[0].VoucherID, got[len(got)-1].VoucherID, maxRooms, maxRooms+5)
	}
	var want strings.Builder
	for _, f := range []struct{ name, typ, help string }{
		{"flashsale_queue_waiting", "gauge", "Tickets waiting in a voucher's waiting room."},
		{"flashsale_queue_admitted_total", "counter", "Buyers admitted (passes handed out)."},
		{"flashsale_queue_eta_seconds", "gauge", "Estimated wait of a ticket joining now; absent when it would be beyond the units still to be admitted."},
		{"flashsale_queue_units_ahead", "gauge", "Units still to be admitted: left, less the passes out and the orders being placed."},
	} {
		fmt.Fprintf(&want, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		for _, s := range got {
			v := map[string]int64{"flashsale_queue_waiting": s.Waiting, "flashsale_queue_admitted_total": s.Admitted, "flashsale_queue_eta_seconds": *s.ETASeconds,
				"flashsale_queue_units_ahead": s.UnitsAhead}[f.name]
			fmt.Fprintf(&want, "%s{voucher=\"%d\"} %d\n", f.name, s.VoucherID, v)
		}
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want.String()),
		"flashsale_queue_waiting", "flashsale_queue_admitted_total", "flashsale_queue_eta_seconds", "flashsale_queue_units_ahead"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(w); n != 8*maxRooms {
		t.Errorf("%d series, want 8 per room", n)
	}
	if problems, err := testutil.GatherAndLint(m.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	r.set(nil, errors.New("redis down"))
	w.sample(ctx, nil)
	if len(m.QueueStats()) != maxRooms {
		t.Error("a failed read dropped the last sample")
	}
	r.set(many[:1], nil)
	w.sample(ctx, nil)
	if s := m.QueueStats(); len(s) != 1 || s[0] != many[0] {
		t.Errorf("after one room left: %+v", s)
	}
}
