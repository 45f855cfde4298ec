package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale/async"
	"github.com/redis/rueidis"
)

// durabilityCheckTimeout bounds the start-up check of Redis's settings.
const durabilityCheckTimeout = 10 * time.Second

// durabilityFlags say when the async gate may accept an order.
type durabilityFlags struct {
	mode           string
	minReplicas    int
	replicaTimeout time.Duration
	trusted        bool
}

func (d *durabilityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.mode, "durability", string(async.DurabilityMemory),
		"with --strategy async, when an order is accepted: memory (in Redis's memory), aof (fsynced to Redis's AOF) or replica (on --min-replicas replicas)")
	fs.IntVar(&d.minReplicas, "min-replicas", async.DefaultMinReplicas, "with --durability replica, how many replicas must have an order before it is accepted")
	fs.DurationVar(&d.replicaTimeout, "replica-timeout", async.DefaultReplicaTimeout,
		"with --durability replica, how long to wait for them; then the buyer is told to retry (503 unavailable)")
	fs.BoolVar(&d.trusted, "durability-trusted", false,
		"trust that Redis keeps the --durability promise where its settings cannot be read (CONFIG disabled on managed Redis)")
}

// validate checks the flags.
func (d *durabilityFlags) validate() error {
	if _, err := async.ParseDurability(d.mode); err != nil {
		return errors.New("--durability must be memory, aof or replica")
	}
	if d.minReplicas < 1 || d.replicaTimeout < time.Millisecond {
		return errors.New("--min-replicas must be at least 1 and --replica-timeout at least 1ms")
	}
	return nil
}

// config returns the flags as the async package takes them.
func (d *durabilityFlags) config() async.DurabilityConfig {
	mode, _ := async.ParseDurability(d.mode)
	return async.DurabilityConfig{Mode: mode, MinReplicas: d.minReplicas, ReplicaTimeout: d.replicaTimeout, Trusted: d.trusted}
}

// check checks Redis's settings against the mode (and logs what it costs).
func (d *durabilityFlags) check(client rueidis.Client, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), durabilityCheckTimeout)
	defer cancel()
	return async.CheckDurability(ctx, client, d.config(), log)
}
