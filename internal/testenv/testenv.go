// Package testenv connects tests to the real Redis and MariaDB/MySQL servers
// and isolates each test: a unique Redis key prefix and a fresh database,
// both removed when the test ends. A missing server fails the test; it never
// skips it, so a green run always means the tests talked to real servers.
//
// FLASHSALE_TEST_REDIS (host:port, default 127.0.0.1:6379) and
// FLASHSALE_TEST_MYSQL (user:pass@tcp(host:port)/, default
// root@tcp(127.0.0.1:3306)/) point the tests elsewhere.
//
// Tests that cause Redis faults get private topologies instead, as child
// redis-server processes on their own ports (20000-31999, below the
// kernel's ephemeral range) and directories; the shared server is never
// touched. Every process is killed when its test ends (SharedCluster's
// when RunMain returns), and on Linux also when the test binary dies
// (Pdeathsig). A missing redis-server or a topology that does not come up
// fails the test with the tail of the servers' logs.
//
//   - StartRedis(t, opts...) *RedisServer: one node; WithAOF, WithConfig.
//     Kill (SIGKILL), Stop (SIGTERM), Start (same port, dir and config:
//     an AOF survives; waits past LOADING), Restart. Addr, URL,
//     ClientOption and Client talk to that node only.
//   - StartSentinelSet(t, opts...) *SentinelSet: a primary, a replica and
//     three Sentinels (quorum 2, down after 1s). URL is
//     redis://s1/0?addr=s2&addr=s3&master_set=NAME (rueidis.ParseURL);
//     Primary, Replica, KillPrimary, WaitFailover, WaitReplicaSync.
//   - StartCluster(t, opts...) *Cluster: three masters with a replica each
//     (WithoutReplicas: none), node timeout 1s. URL is
//     redis://m1?addr=m2&addr=m3; MasterOf, KillMasterOf, WaitFailover,
//     MigrateSlot (safe while clients write). Slot is the hash slot of a key.
//   - SharedCluster(t): one cluster per test binary, checked on every call
//     and replaced if a test left it unhealthy; needs
//     func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/redispin"
	_ "github.com/go-sql-driver/mysql" // the MySQL driver for database/sql
	"github.com/redis/rueidis"
)

// RedisAddr returns the address of the test Redis server.
func RedisAddr() string {
	if a := os.Getenv("FLASHSALE_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// mysqlBase returns the DSN of the test MySQL server without a database.
func mysqlBase() string {
	if a := os.Getenv("FLASHSALE_TEST_MYSQL"); a != "" {
		return a
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// Unique returns a short random hex string for names that must not clash
// between tests, processes and runs.
func Unique() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// RedisOption returns the client options tests use for the test server.
func RedisOption() rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{RedisAddr()}, DisableCache: true}
}

// Redis returns a client of the test Redis server and a key prefix unique to
// this test ("test:<hex>:"). Every key under the prefix is deleted when the
// test ends, and the client is closed.
func Redis(t testing.TB) (rueidis.Client, string) {
	t.Helper()
	c, err := rueidis.NewClient(RedisOption())
	if err != nil {
		t.Fatalf("testenv: Redis at %s is not reachable (start it with: redis-server --daemonize yes --save \"\"): %v", RedisAddr(), err)
	}
	c = redispin.Wrap(c)
	prefix := "test:" + Unique() + ":"
	t.Cleanup(func() {
		defer c.Close()
		if err := DeletePrefix(context.Background(), c, prefix); err != nil {
			t.Errorf("testenv: cleaning Redis keys %s*: %v", prefix, err)
		}
	})
	return c, prefix
}

// DeletePrefix deletes every key that starts with prefix. On a cluster a
// SCAN sees one node's keys only, so every node is scanned (replicas too:
// a key they list twice is deleted once) and each key is deleted through c,
// which sends it to its slot's master (one UNLINK may not span slots).
func DeletePrefix(ctx context.Context, c rueidis.Client, prefix string) error {
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return err
			}
			cmds := make(rueidis.Commands, 0, len(e.Elements))
			for _, k := range e.Elements {
				cmds = append(cmds, c.B().Unlink().Key(k).Build())
			}
			for _, r := range c.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					return err
				}
			}
			if e.Cursor == 0 {
				break
			}
			cursor = e.Cursor
		}
	}
	return nil
}

// MySQL creates a fresh database for this test and returns its DSN in
// go-sql-driver form (user:pass@tcp(host:port)/name?parseTime=true). The
// database is dropped when the test ends.
func MySQL(t testing.TB) string {
	t.Helper()
	name := "fs_test_" + Unique()
	admin, err := sql.Open("mysql", mysqlBase())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("testenv: MySQL at %s is not usable (start it with: start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd): %v", mysqlBase(), err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("testenv: dropping database %s: %v", name, err)
		}
	})
	return mysqlBase() + name + "?parseTime=true"
}

// MySQLURL is MySQL in the mysql://user:pass@host:port/name form the
// service's --db flag takes.
func MySQLURL(t testing.TB) string {
	t.Helper()
	dsn := MySQL(t)
	// user[:pass]@tcp(host:port)/name?params -> mysql://user[:pass]@host:port/name
	userinfo, rest, _ := strings.Cut(dsn, "@tcp(")
	hostport, rest, _ := strings.Cut(rest, ")/")
	name, _, _ := strings.Cut(rest, "?")
	return fmt.Sprintf("mysql://%s@%s/%s", userinfo, hostport, name)
}

// CommandCalls returns INFO commandstats as command name → calls, a
// command's subcommands summed.
func CommandCalls(t testing.TB, c rueidis.Client) map[string]int {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		name, _, _ = strings.Cut(strings.TrimPrefix(name, "cmdstat_"), "|") // script|load counts as script
		k, _ := strconv.Atoi(n)
		calls[name] += k
	}
	return calls
}
