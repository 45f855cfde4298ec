package async

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestGateAdmitSparesReplicaConfirmations: over its wait, the gate's
// queue refuses an order (errGateBusy) but never a request only to know
// that Redis's writes are on the replicas (confirmReplicated, nil args),
// and one full batch may always wait. The batch in flight counts.
func TestGateAdmitSparesReplicaConfirmations(t *testing.T) {
	var pace atomic.Int64
	pace.Store(int64(10 * time.Millisecond))
	q := &gateQueue{maxBatch: 2, maxWait: 50 * time.Millisecond, pace: &pace}
	q.inflight.Store(1)
	// (1 in flight + queued/2 full batches + its own) × 10 ms against 50 ms.
	for queued, want := range map[int]error{0: nil, 1: nil, 2: nil, 7: nil, 8: errGateBusy, 9: errGateBusy} {
		order := &gateCall{args: []string{"1", "2", "1", ""}}
		if err := q.admit(order, queued); err != want {
			t.Errorf("an order with %d queued ahead: %v, want %v", queued, err, want)
		}
		if order.batches != queued/2+2 || order.queued.IsZero() {
			t.Errorf("an order with %d queued ahead is to wait for %d batches, queued at %v", queued, order.batches, order.queued)
		}
		if err := q.admit(&gateCall{}, queued); err != nil {
			t.Errorf("a replica confirmation with %d queued ahead: %v, want nil", queued, err)
		}
	}
}

// TestGatePaceIsTheWaitPerBatch: a batch answered moves the pace a
// quarter of the way to the mean wait of its orders per batch they waited
// for; a replica confirmation, never queued by admit, does not count.
func TestGatePaceIsTheWaitPerBatch(t *testing.T) {
	var pace atomic.Int64
	q := &gateQueue{maxBatch: 3, pace: &pace}
	t0 := time.Now()
	q.paced([]*gateCall{{}}, t0)
	if pace.Load() != 0 {
		t.Fatalf("pace %v after a batch of a replica confirmation; want 0", time.Duration(pace.Load()))
	}
	// 40 ms for 1 batch, 40 ms for 2: 30 ms a batch on average.
	q.paced([]*gateCall{{queued: t0, batches: 1}, {queued: t0, batches: 2}, {}}, t0.Add(40*time.Millisecond))
	if got, want := time.Duration(pace.Load()), 30*time.Millisecond/4; got != want {
		t.Fatalf("pace %v after a batch; want %v", got, want)
	}
}
