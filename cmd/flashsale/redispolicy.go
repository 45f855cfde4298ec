package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// policyTimeout bounds a check of Redis's eviction policy; policyEvery is
// how often a running process checks it again (one CONFIG GET).
const (
	policyTimeout = 5 * time.Second
	policyEvery   = 10 * time.Second
)

// checkEvictionPolicy refuses a Redis, any node the client knows, whose
// maxmemory-policy is not noeviction, and warns loudly when it cannot tell
// (CONFIG disabled or renamed, as on some managed services).
// watchEvictionPolicy checks the primary again every policyEvery.
func checkEvictionPolicy(ctx context.Context, client rueidis.Client, log *slog.Logger) error {
	// The allkeys-* policies evict the gate's keys (a lost buyers hash
	// sells a buyer twice, a lost stream loses accepted orders). The
	// volatile-* policies evict what has a TTL: a held lock's key (two
	// holders), an order's pointer, an idempotency key's answer,
	// rate-limit state. A policy safe for one strategy only is refused for
	// all, so that switching --strategy never makes a deployment unsafe.
	// Under noeviction a full Redis refuses writes, which the service
	// answers with 503 and Retry-After and no partial write.
	ctx, cancel := context.WithTimeout(ctx, policyTimeout)
	defer cancel()
	nodes := client.Nodes()
	addrs := slices.Sorted(maps.Keys(nodes))
	for _, addr := range addrs {
		node := nodes[addr]
		cfg, err := node.Do(ctx, node.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
		policy := cfg["maxmemory-policy"]
		if err != nil || policy == "" {
			log.Error("CANNOT CHECK REDIS'S EVICTION POLICY (CONFIG GET refused): make sure maxmemory-policy is noeviction; "+
				"any other policy can evict locks, order pointers or, with allkeys-*, the sale's stock and buyers (oversell, lost orders)",
				"node", addr, "err", err)
			continue
		}
		if policy != "noeviction" {
			where := ""
			if len(nodes) > 1 {
				where = " on " + addr
			}
			return fmt.Errorf("--redis: maxmemory-policy is %s%s; flashsale needs noeviction: %s can evict %s "+
				"(set maxmemory-policy noeviction in redis.conf or with CONFIG SET)", policy, where, policy, evictable(policy))
		}
	}
	return nil
}

// watchEvictionPolicy reads the eviction policy of the server the client
// talks to (the current primary, behind Sentinel) every policyEvery and
// logs loudly, every time, while it is not noeviction: a promoted replica
// is not checked at start, and a process cannot refuse to run once it
// serves. Where CONFIG is refused it stays quiet (the start-up check said
// so). The returned func stops the watch and waits for it.
func watchEvictionPolicy(client rueidis.Client, log *slog.Logger) (stop func()) {
	return every(policyEvery, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, policyTimeout)
		defer cancel()
		cfg, err := client.Do(ctx, client.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
		if policy := cfg["maxmemory-policy"]; err == nil && policy != "" && policy != "noeviction" {
			log.Error("REDIS MAY EVICT: the current Redis primary's maxmemory-policy is "+policy+", not noeviction (a promoted replica configured unlike the old primary, or a CONFIG SET?); it can evict "+evictable(policy)+"; set maxmemory-policy noeviction",
				"policy", policy)
		}
	})
}

// evictable says what a policy other than noeviction can evict.
func evictable(policy string) string {
	if strings.HasPrefix(policy, "volatile") {
		return "every key with a TTL: held locks (two holders at once), order pointers, rate limits"
	}
	return "any key: a sale's stock, buyers and unpersisted orders (oversell, lost orders)"
}
