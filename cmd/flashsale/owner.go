package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/flashsale/flashsale/async"
)

// ownerEvery is how often a running process checks the claim on its Redis
// prefix again: a claim Redis lost is made again by this process before
// another deployment can take the prefix, and one that names another
// database is logged.
const ownerEvery = 5 * time.Second

// claimPrefix claims --redis-prefix for --db's database, or checks that it
// is that database's: every key under a prefix describes one system of
// record, and two deployments on one prefix take each other's orders (a
// consumer joins the other's consumer groups). A prefix claimed for
// another database is refused, naming both and how to fix it.
func (b *backends) claimPrefix(ctx context.Context, log *slog.Logger) error {
	id, err := b.db.Identity(ctx)
	if err != nil {
		return fmt.Errorf("--db: %w", err)
	}
	b.owner = async.Owner{ID: id, Database: redact(b.dbURL)}
	claimed, err := async.ClaimPrefix(ctx, b.redis, b.prefix, b.owner)
	if owned, ok := errors.AsType[*async.PrefixOwnedError](err); ok {
		return b.prefixOwned(owned)
	}
	if err != nil {
		return fmt.Errorf("--redis: %w", err)
	}
	if claimed {
		log.Info("claimed the Redis prefix for this database: its first use, or Redis lost its data (and the claim with it)",
			"redis_prefix", b.prefix, "database_id", id)
	}
	return nil
}

// prefixOwned says why a process refuses a prefix claimed for another
// database, and how to fix it.
func (b *backends) prefixOwned(owned *async.PrefixOwnedError) error {
	mine := "point --db at that deployment's database"
	if b.scratchDB {
		mine = "run on that deployment's database (--db); this process's, an embedded one, is new on every start"
	}
	return fmt.Errorf("--redis-prefix: %w. Two deployments on one Redis prefix take each other's orders, so this process does not start. "+
		"Give this deployment a prefix of its own (for example --redis-prefix %s), or %s. "+
		"If that deployment is retired, delete its keys (every key starting with %q; the claim, %sowner, is one)",
		owned, suggestPrefix(b.dbURL, b.prefix), mine, b.prefix, b.prefix)
}

// suggestPrefix proposes a prefix for the database at dbURL: its name.
func suggestPrefix(dbURL, taken string) string {
	name := "mydeployment"
	if u, err := url.Parse(dbURL); err == nil {
		if base := strings.TrimSuffix(path.Base(u.Path), ".db"); base != "" && base != "." && base != "/" {
			name = base
		}
	}
	if name+":" == taken {
		name += "-2"
	}
	return name + ":"
}

// watchPrefixOwner checks the claim on the prefix every ownerEvery: it
// claims it again when Redis lost it, and logs loudly, at most once a
// minute, when it names another database (a deployment that started while
// the claim was gone). The returned func stops the watch and waits for it.
func watchPrefixOwner(b *backends, log *slog.Logger) (stop func()) {
	var lastLoud time.Time
	return every(ownerEvery, func(ctx context.Context) {
		claimed, err := async.ClaimPrefix(ctx, b.redis, b.prefix, b.owner)
		owned, isOwned := errors.AsType[*async.PrefixOwnedError](err)
		switch {
		case claimed:
			log.Warn("the claim on the Redis prefix was gone (Redis lost its data?); claimed it again for this database",
				"redis_prefix", b.prefix, "database_id", b.owner.ID)
		case isOwned && time.Since(lastLoud) >= time.Minute:
			lastLoud = time.Now()
			log.Error("ANOTHER DEPLOYMENT CLAIMED THIS REDIS PREFIX while its claim was gone: two deployments share it. "+
				"This process's consumer leaves the other's orders pending (never dead-letters them); stop the one with the wrong --redis-prefix or --db",
				"err", owned)
		}
	})
}

// every runs fn every d in the background until the returned func is
// called; that func waits for the run in progress.
func every(d time.Duration, fn func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}
