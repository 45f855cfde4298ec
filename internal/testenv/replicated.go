package testenv

import (
	"context"
	"fmt"
	"strconv"
	"testing"
)

// StartReplicated starts a primary and one replica of it, each with opts,
// and returns them once the replica is linked to the primary.
func StartReplicated(t testing.TB, opts ...ServerOption) (primary, replica *RedisServer) {
	t.Helper()
	primary = StartRedis(t, opts...)
	of := WithConfig("replicaof", primary.host+" "+strconv.Itoa(primary.port))
	replica = StartRedis(t, append(opts[:len(opts):len(opts)], of)...)
	waitFor(t, startTimeout, "the replica to link to its primary", func(ctx context.Context) error {
		repl, err := replica.info(ctx, "replication")
		if err == nil && repl["master_link_status"] != "up" {
			err = fmt.Errorf("link %q", repl["master_link_status"])
		}
		return err
	}, func() string { return "" })
	return primary, replica
}
