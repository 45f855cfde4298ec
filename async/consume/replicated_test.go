package consume_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/internal/testenv"
)

// replicatedEnv starts a primary and a replica of it and returns an env on
// the primary and the replica's process id (to stop it with SIGSTOP: a
// replica that no longer acknowledges anything).
func replicatedEnv(t testing.TB) (*env, int) {
	t.Helper()
	primary, replica := testenv.StartReplicated(t)
	dsn, url := asynctest.MySQLDatabase(t)
	e := &env{asynctest.NewOn(t, primary.Client(t), testenv.Unique()+":", dsn, url)}
	rc := replica.Client(t)
	text, err := rc.Do(context.Background(), rc.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(infoField(text, "process_id"))
	return e, pid
}

// infoField returns one field of an INFO reply.
func infoField(text, name string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// TestConsumerPersistsOnlyReplicated: with MinReplicas, a consumer leaves
// pending the entries a stopped replica does not acknowledge (none reaches
// MySQL), and persists them all once it runs again.
func TestConsumerPersistsOnlyReplicated(t *testing.T) {
	e, pid := replicatedEnv(t)
	v := e.Voucher(10)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	accepted := e.Buy(v.ID, 1, 2, 3) // durability memory: no WAIT
	cfg := e.ConsumerConfig()
	cfg.MinReplicas, cfg.ReplicaTimeout = 1, 100*time.Millisecond
	c := consume.New(e.Client, e.DB, cfg)
	e.Run(c)
	e.WaitFor("batches the replica did not acknowledge", 30*time.Second, func() (bool, error) {
		return c.Stats().Unreplicated >= 3, nil
	})
	if a, err := e.DB.AuditVoucher(context.Background(), v.ID); err != nil || a.Orders != 0 || c.Stats().Persisted != 0 {
		t.Fatalf("the replica stopped: MySQL %+v (%v), %+v; want nothing persisted", a, err, c.Stats())
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e.WaitDrained(v.ID, len(accepted))
	if s := c.Stats(); s.Persisted != uint64(len(accepted)) || s.DeadLettered != 0 {
		t.Fatalf("the replica running again: %+v; want %d persisted, no dead letter", s, len(accepted))
	}
}
