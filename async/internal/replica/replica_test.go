package replica_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async/internal/replica"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestWait: a Wait acknowledged by the replica answers nil with the
// replies of the commands it covered; once the replica stops reading, it
// answers how many acknowledged, even when its own commands wrote nothing
// and the write to cover was made on another connection (the SET).
func TestWait(t *testing.T) {
	primary, rep := testenv.StartReplicated(t)
	client, rc := primary.Client(t), rep.Client(t)
	ctx := context.Background()
	// A timeout that a loaded machine's replica meets, and a short one for
	// the stopped replica (WAIT then waits all of it).
	w := replica.Wait{Key: "{v1}:sync", Replicas: 1, Timeout: 10 * time.Second}
	stalled := replica.Wait{Key: "{v1}:sync", Replicas: 1, Timeout: 100 * time.Millisecond}

	res, err := w.Do(ctx, client, client.B().Incr().Key("{v1}:n").Build(), client.B().Get().Key("{v1}:none").Build())
	if err != nil || len(res) != 2 {
		t.Fatalf("Do = %d replies, %v; want 2, nil", len(res), err)
	}
	if n, err := res[0].AsInt64(); n != 1 || err != nil {
		t.Errorf("INCR = %d, %v; want 1", n, err)
	}
	if got, err := rc.Do(ctx, rc.B().Get().Key("{v1}:n").Build()).ToString(); got != "1" || err != nil {
		t.Errorf("the replica's {v1}:n = %q, %v; want 1 once acknowledged", got, err)
	}

	rep.Pause()
	defer rep.Resume()
	if err := client.Do(ctx, client.B().Incr().Key("{v1}:n").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := stalled.Do(ctx, client); err == nil || !strings.Contains(err.Error(), "0 of 1 replicas acknowledged") {
		t.Errorf("Do with the replica stopped = %v; want 0 of 1 acknowledged", err)
	}
	rep.Resume()
	if _, err := w.Do(ctx, client); err != nil {
		t.Errorf("Do once the replica runs again = %v; want nil", err)
	}
	if got, err := rc.Do(ctx, rc.B().Get().Key("{v1}:n").Build()).ToString(); got != "2" || err != nil {
		t.Errorf("the replica's {v1}:n = %q, %v; want 2: the write of another connection is covered", got, err)
	}
}
