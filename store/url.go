package store

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Dialect names, as returned by DB.Dialect.
const (
	MySQL  = "mysql"
	SQLite = "sqlite"
)

// Pool defaults for MySQL. The service runs hundreds of concurrent requests
// on 2 cores, but MariaDB's default max_connections is 151 and three
// instances share one server: 3×40 leaves room for tools and tests. Override
// with the max_open_conns and max_idle_conns URL parameters.
const (
	defaultMaxOpenConns    = 40
	defaultConnMaxLifetime = 30 * time.Minute
	defaultDialTimeout     = 5 * time.Second
)

// SQLite pool sizes. SQLite allows one writer at a time, so writes and
// transactions share a single connection and queue in Go's pool rather than
// in SQLite's busy-sleep loop (which sleeps up to 100 ms per retry and never
// fails over fairly); reads use a separate small pool of query-only
// connections, which WAL lets run beside the writer.
const sqliteReaders = 4

// sqliteBusyTimeout bounds how long SQLite waits for another process's lock.
const sqliteBusyTimeout = 10 * time.Second

// acceptedURLs is quoted in every URL error.
const acceptedURLs = "want mysql://user:pass@host:port/name[?params], sqlite:///abs/path/file.db, sqlite://relative/file.db or sqlite::memory:"

// config is what Open needs to connect: a driver, DSNs and pool sizes.
type config struct {
	dialect string
	dsn     string // MySQL, or the SQLite writer
	// readDSN is the DSN of SQLite's query-only reader pool; empty when the
	// writer serves reads too (MySQL, and SQLite :memory:).
	readDSN      string
	maxOpen      int
	maxIdle      int
	maxLifetime  time.Duration
	databaseName string // for messages
	host         string // for messages
}

// parseURL turns a database URL into a config. Errors wrap ErrBadURL and
// never echo a password.
func parseURL(raw string) (*config, error) {
	switch {
	case strings.HasPrefix(raw, "mysql://"):
		return parseMySQL(raw)
	case strings.HasPrefix(raw, "sqlite:"):
		return parseSQLite(raw)
	}
	return nil, badURL(raw, "unknown scheme")
}

// badURL builds the error for an unusable URL, with any password left
// out: whatever precedes its last '@' may hold one, whether or not the
// rest parses as a URL (a driver DSN like root:pw@tcp(host)/db, a
// mistyped scheme, an unescaped '/' in the password).
func badURL(raw, why string) error {
	shown := raw
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		shown = "…" + raw[at:]
	}
	return fmt.Errorf("%w %q: %s; %s", ErrBadURL, shown, why, acceptedURLs)
}

// parseMySQL handles mysql://user:pass@host:port/name?params. The params are
// go-sql-driver DSN parameters (tls, timeout, interpolateParams, …) plus
// max_open_conns, max_idle_conns and conn_max_lifetime for the pool.
// parseTime, loc and clientFoundRows are always forced: the store depends on
// them.
func parseMySQL(raw string) (*config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, badURL(raw, "not a URL")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, badURL(raw, "no host")
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || strings.Contains(name, "/") {
		return nil, badURL(raw, "the path must be exactly one database name")
	}
	c := &config{
		dialect:      MySQL,
		maxOpen:      defaultMaxOpenConns,
		maxLifetime:  defaultConnMaxLifetime,
		databaseName: name,
		host:         u.Host,
	}
	q := u.Query()
	if err := c.poolParams(raw, q); err != nil {
		return nil, err
	}
	// The remaining parameters go to the driver, which validates them.
	mc, err := mysql.ParseDSN("/?" + q.Encode())
	if err != nil {
		return nil, badURL(raw, err.Error())
	}
	mc.User = u.User.Username()
	mc.Passwd, _ = u.User.Password()
	mc.Net = "tcp"
	mc.Addr = u.Host
	if u.Port() == "" {
		mc.Addr = u.Host + ":3306"
	}
	mc.DBName = name
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.ClientFoundRows = true // rows affected = rows matched, as in SQLite
	if !q.Has("interpolateParams") {
		mc.InterpolateParams = true // one round trip per statement, not two
	}
	if mc.Timeout == 0 {
		mc.Timeout = defaultDialTimeout
	}
	c.dsn = mc.FormatDSN()
	return c, nil
}

// poolParams takes the pool parameters out of q.
func (c *config) poolParams(raw string, q url.Values) error {
	for _, p := range []struct {
		key string
		dst *int
	}{{"max_open_conns", &c.maxOpen}, {"max_idle_conns", &c.maxIdle}} {
		if !q.Has(p.key) {
			continue
		}
		n, err := strconv.Atoi(q.Get(p.key))
		if err != nil || n < 1 {
			return badURL(raw, p.key+" must be a positive integer")
		}
		*p.dst = n
		q.Del(p.key)
	}
	if q.Has("conn_max_lifetime") {
		d, err := time.ParseDuration(q.Get("conn_max_lifetime"))
		if err != nil || d < 0 {
			return badURL(raw, "conn_max_lifetime must be a duration such as 30m")
		}
		c.maxLifetime = d
		q.Del("conn_max_lifetime")
	}
	if c.maxOpen < 2 {
		return badURL(raw, "max_open_conns must be at least 2: Open holds the migration lock on one connection and migrates on another")
	}
	if c.maxIdle == 0 || c.maxIdle > c.maxOpen {
		c.maxIdle = c.maxOpen // a flash sale reuses every connection at once
	}
	return nil
}

// parseSQLite handles sqlite:///abs/path.db, sqlite://relative.db and
// sqlite::memory:. It takes no parameters: the store sets the pragmas.
func parseSQLite(raw string) (*config, error) {
	if raw == "sqlite::memory:" {
		// Every connection to :memory: has its own empty database, so the
		// pool is one connection that serves reads and writes.
		return &config{
			dialect:      SQLite,
			dsn:          "file::memory:?" + sqliteParams(false),
			maxOpen:      1,
			maxIdle:      1,
			databaseName: ":memory:",
		}, nil
	}
	path, ok := strings.CutPrefix(raw, "sqlite://")
	switch {
	case !ok:
		return nil, badURL(raw, "a sqlite URL is sqlite://path or sqlite::memory:")
	case path == "" || path == "/":
		return nil, badURL(raw, "no file path")
	case strings.HasPrefix(path, ":"):
		return nil, badURL(raw, "for an in-memory database write sqlite::memory:")
	case strings.ContainsAny(path, "?#"):
		return nil, badURL(raw, "sqlite URLs take no parameters")
	}
	file := "file:" + (&url.URL{Path: path}).EscapedPath() + "?"
	return &config{
		dialect:      SQLite,
		dsn:          file + sqliteParams(false),
		readDSN:      file + sqliteParams(true),
		maxOpen:      1,
		maxIdle:      1,
		databaseName: path,
	}, nil
}

// sqliteParams returns the modernc DSN parameters of a connection: a busy
// timeout and foreign keys; for the writer WAL and BEGIN IMMEDIATE for
// transactions, so a transaction that reads and then writes never fails on
// the lock upgrade. Readers are query-only, which catches a write sent to
// the wrong pool.
func sqliteParams(reader bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if reader {
		// WAL is a property of the file, set by the writer.
		q.Add("_pragma", "query_only(1)")
		return q.Encode()
	}
	q.Add("_pragma", "journal_mode(WAL)")
	// NORMAL is WAL's recommended setting: no corruption and no loss on a
	// process crash; only a power cut may lose the last commits.
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	return q.Encode()
}
