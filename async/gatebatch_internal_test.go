package async

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestGateAdmitSparesReplicaConfirmations: over its wait, the gate's
// queue refuses an order (errGateBusy) but never a request only to know
// that Redis's writes are on the replicas (confirmReplicated, nil args),
// and one full batch may always wait.
func TestGateAdmitSparesReplicaConfirmations(t *testing.T) {
	var took atomic.Int64
	took.Store(int64(40 * time.Millisecond))
	q := &gateQueue{maxBatch: 2, maxWait: 50 * time.Millisecond, took: &took}
	order := &gateCall{args: []string{"1", "2", "1", ""}}
	for queued, want := range map[int]error{0: nil, 1: nil, 2: errGateBusy, 5: errGateBusy} {
		if err := q.admit(order, queued); err != want {
			t.Errorf("an order with %d queued ahead: %v, want %v", queued, err, want)
		}
		if err := q.admit(&gateCall{}, queued); err != nil {
			t.Errorf("a replica confirmation with %d queued ahead: %v, want nil", queued, err)
		}
	}
}
