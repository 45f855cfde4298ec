package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// migrateBatch is how many keys one MIGRATE moves.
const migrateBatch = 100

// MigrateSlot moves slot to the master to, keys and all, the way
// redis-cli --cluster reshard does, so clients may keep writing: to
// imports it, the owner marks it migrating (from then on a key the owner
// no longer has is answered with ASK, and to accepts it after ASKING),
// the owner's keys move in batches with MIGRATE (atomic per batch), and
// SETSLOT NODE gives the slot to to: first on to, then on the old owner,
// then on the other masters.
func (c *Cluster) MigrateSlot(t testing.TB, slot int, to *RedisServer) {
	t.Helper()
	from := c.MasterOf(slot)
	if from == to {
		return
	}
	s := strconv.Itoa(slot)
	toID, fromID := c.nodeID(t, to), c.nodeID(t, from)
	to.doT(t, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID)
	from.doT(t, "CLUSTER", "SETSLOT", s, "MIGRATING", toID)
	host, port, _ := strings.Cut(to.Addr(), ":")
	for {
		keys, err := from.doT(t, "CLUSTER", "GETKEYSINSLOT", s, strconv.Itoa(migrateBatch)).AsStrSlice()
		if err != nil {
			t.Fatalf("testenv: GETKEYSINSLOT %d on %s: %v", slot, from.Addr(), err)
		}
		if len(keys) == 0 {
			break
		}
		args := append([]string{"MIGRATE", host, port, "", "0", "10000", "KEYS"}, keys...)
		from.doT(t, args...)
	}
	to.doT(t, "CLUSTER", "SETSLOT", s, "NODE", toID)
	from.doT(t, "CLUSTER", "SETSLOT", s, "NODE", toID)
	for _, m := range c.Masters() {
		if m != to && m != from {
			m.doT(t, "CLUSTER", "SETSLOT", s, "NODE", toID)
		}
	}
	// Replicas and the rest learn it by gossip; wait until every running
	// node names the new owner, so a client's topology refresh cannot
	// send it back.
	waitFor(t, startTimeout, "every node to see slot "+s+" on "+to.Addr(), func(ctx context.Context) error {
		return c.agreeOwner(ctx, slot, to)
	}, c.logs)
}

// agreeOwner returns nil if every running node says m owns slot.
func (c *Cluster) agreeOwner(ctx context.Context, slot int, m *RedisServer) error {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		ranges, err := c.slotRangesOf(ctx, n)
		if err != nil {
			return err
		}
		for _, r := range ranges {
			if r.from <= slot && slot <= r.to && r.master != m {
				return fmt.Errorf("%s says slot %d is on %s", n.Addr(), slot, r.master.Addr())
			}
		}
	}
	return nil
}

// nodeID returns the cluster node ID of n.
func (c *Cluster) nodeID(t testing.TB, n *RedisServer) string {
	t.Helper()
	id, err := n.doT(t, "CLUSTER", "MYID").ToString()
	if err != nil {
		t.Fatalf("testenv: CLUSTER MYID on %s: %v", n.Addr(), err)
	}
	return id
}
