package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/redispin"
	"github.com/flashsale/flashsale/store"
)

// backendFlags name the Redis server and the database. Empty means the
// embedded ones.
type backendFlags struct {
	redis       string
	redisPrefix string
	db          string
}

func (f *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.redis, "redis", "", "Redis URL: redis://host:port/db for one node; redis://s1:port/db?addr=s2:port&addr=s3:port&master_set=NAME through Sentinels s1..s3; redis://m1:port?addr=m2:port&addr=m3:port for a Redis Cluster (docs/operations.md, Redis topologies); empty: an embedded in-process Redis, for trying things out")
	fs.StringVar(&f.redisPrefix, "redis-prefix", async.DefaultPrefix, "prefix of every Redis key (several deployments can share one Redis)")
	fs.StringVar(&f.db, "db", "", "database URL (mysql://user:pass@host:port/name, the database must exist; or sqlite:///path.db); empty: an embedded SQLite file, for trying things out")
}

// registerServers registers the flags for a command that works on what
// running servers hold: they name those servers' backends, and an
// embedded one, which starts empty, is refused (see needServers).
func (f *backendFlags) registerServers(fs *flag.FlagSet) {
	fs.StringVar(&f.redis, "redis", "", "the servers' Redis URL (redis://host:port/db, or a Sentinel or Cluster URL as serve takes); required")
	fs.StringVar(&f.redisPrefix, "redis-prefix", async.DefaultPrefix, "the servers' prefix of every Redis key")
	fs.StringVar(&f.db, "db", "", "the servers' database URL (mysql://user:pass@host:port/name); required")
}

// validate checks the flags that need no connection.
func (f *backendFlags) validate() error {
	if strings.ContainsAny(f.redisPrefix, "{}") {
		return errors.New("--redis-prefix must hold no braces: they would change the keys' Redis Cluster hash tags")
	}
	return nil
}

// backends are the open connections every command shares.
type backends struct {
	redis rueidis.Client
	db    *store.DB
	ids   *idgen.Slots
	// redisURL and dbURL are where the backends are, embedded ones
	// included, so other processes can reach them.
	redisURL, dbURL string
	// prefix starts every Redis key; owner is the database it belongs to
	// (owner.go).
	prefix  string
	owner   async.Owner
	closers []func()
	// scratchDB: the database is an embedded one, new on every start.
	scratchDB bool
}

// openBackends connects to Redis and the database (migrating it) and starts
// the ID generator, whose high-water mark comes from the orders table.
// Missing URLs start embedded backends and say so in the log.
func openBackends(ctx context.Context, f backendFlags, log *slog.Logger) (_ *backends, err error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	b := &backends{redisURL: f.redis, dbURL: f.db, prefix: cmp.Or(f.redisPrefix, async.DefaultPrefix)}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	opt, err := b.redisOption(log)
	if err != nil {
		return nil, err
	}
	if b.redis, err = rueidis.NewClient(opt); err != nil {
		return nil, fmt.Errorf("connecting to Redis at %s: %w", b.redisURL, err)
	}
	b.redis = redispin.Wrap(b.redis)
	b.closers = append(b.closers, b.redis.Close)
	if f.redis != "" {
		if err := checkEvictionPolicy(ctx, b.redis, log); err != nil {
			return nil, err
		}
		b.closers = append(b.closers, watchEvictionPolicy(b.redis, log))
	}
	if b.dbURL == "" {
		dir, remove, err := makeScratch()
		if err != nil {
			return nil, err
		}
		b.closers = append(b.closers, remove)
		b.dbURL, b.scratchDB = "sqlite://"+filepath.Join(dir, "flashsale.db"), true
		log.Warn("no --db given: using an embedded SQLite database, for trying things out only", "path", filepath.Join(dir, "flashsale.db"))
	}
	if b.db, err = store.Open(ctx, b.dbURL); err != nil {
		return nil, fmt.Errorf("--db: %w", err)
	}
	b.closers = append(b.closers, func() { b.db.Close() })
	if err := b.claimPrefix(ctx, log); err != nil {
		return nil, err
	}
	if f.redis != "" {
		b.closers = append(b.closers, watchPrefixOwner(b, log))
	}
	log.Info("connected", "redis", redact(b.redisURL), "redis_prefix", b.prefix, "db", redact(b.dbURL), "database_id", b.owner.ID)
	b.ids = idgen.NewSlots(b.redis, "id", idgen.WithPrefix(b.prefix+"idgen:"), idgen.WithFloor(b.db.MaxOrderID), idgen.WithLogger(log))
	b.closers = append(b.closers, b.ids.Close)
	return b, nil
}

// redisOption returns the client options for --redis, starting an
// embedded server (miniredis, listening on a loopback port) when it is
// empty.
func (b *backends) redisOption(log *slog.Logger) (rueidis.ClientOption, error) {
	if b.redisURL != "" {
		opt, err := rueidis.ParseURL(b.redisURL)
		if err != nil && !strings.Contains(b.redisURL, "://") {
			return opt, fmt.Errorf("--redis %q is not a URL: write it as redis://%s/0 (redis://host:port/db)", b.redisURL, b.redisURL)
		}
		if err != nil {
			return opt, fmt.Errorf("--redis: %w", err)
		}
		opt.DisableCache = true
		return opt, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("starting the embedded Redis: %w", err)
	}
	b.closers = append(b.closers, mr.Close)
	b.redisURL = "redis://" + mr.Addr() + "/0"
	log.Warn("no --redis given: using an embedded in-process Redis (miniredis), for trying things out only", "addr", mr.Addr())
	// miniredis is one node without client-side caching.
	return rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true}, nil
}

// Embedded reports whether any backend is an embedded one.
func (f backendFlags) Embedded() bool { return f.redis == "" || f.db == "" }

// Close releases everything openBackends opened, newest first.
func (b *backends) Close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
}

// ready reports whether Redis and the database answer.
func (b *backends) ready(ctx context.Context) (map[string]any, error) {
	var errs []error
	if err := b.redis.Do(ctx, b.redis.B().Ping().Build()).Error(); err != nil {
		errs = append(errs, fmt.Errorf("redis: %w", err))
	}
	if err := b.db.Ping(ctx); err != nil {
		errs = append(errs, fmt.Errorf("database: %w", err))
	}
	return nil, errors.Join(errs...)
}
