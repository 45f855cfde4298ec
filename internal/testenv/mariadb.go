package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MariaDB is a private mariadbd server owned by one test, for tests that
// stop and start the database (an outage) without touching the shared
// server on 3306 that other tests use. It listens on 127.0.0.1 on a free
// port, keeps its data in a temporary directory, and runs without grant
// tables: user root, no password.
type MariaDB struct {
	t       testing.TB
	dir     string
	datadir string
	port    int

	mu   sync.Mutex
	proc *child // nil when not running
}

// mariadbName is the database StartMariaDB creates.
const mariadbName = "flashsale"

// StartMariaDB installs a fresh data directory, starts mariadbd on it and
// creates the database its URL names. The server is killed when the test
// ends. A missing mariadbd or mariadb-install-db fails the test.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	dir := t.TempDir()
	m := &MariaDB{t: t, dir: dir, datadir: filepath.Join(dir, "data")}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+m.datadir,
		"--auth-root-authentication-method=normal", "--user="+currentUser(), "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("testenv: mariadb-install-db: %v\n%s", err, out)
	}
	m.port = freePort(t)
	t.Cleanup(m.kill)
	m.Start()
	db, err := sql.Open("mysql", m.base())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + mariadbName); err != nil {
		t.Fatalf("testenv: creating database on the private MariaDB: %v", err)
	}
	return m
}

// URL returns the server's database as a mysql:// URL for store.Open.
func (m *MariaDB) URL() string {
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/%s", m.port, mariadbName)
}

// DSN returns the server's database as a go-sql-driver DSN.
func (m *MariaDB) DSN() string {
	return m.base() + mariadbName + "?parseTime=true"
}

// base is the DSN of the server without a database.
func (m *MariaDB) base() string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", m.port)
}

// Start starts the server (again, after Stop) and waits until it answers.
func (m *MariaDB) Start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil {
		m.t.Fatalf("testenv: private MariaDB is running already")
	}
	log, err := os.OpenFile(filepath.Join(m.dir, "mariadbd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		m.t.Fatalf("testenv: %v", err)
	}
	defer log.Close()
	cmd := exec.Command("/usr/sbin/mariadbd", "--no-defaults",
		"--datadir="+m.datadir,
		"--socket="+filepath.Join(m.dir, "mariadbd.sock"),
		"--pid-file="+filepath.Join(m.dir, "mariadbd.pid"),
		"--port="+fmt.Sprint(m.port), "--bind-address=127.0.0.1",
		"--user="+currentUser(), "--skip-grant-tables", "--skip-name-resolve",
		"--innodb-buffer-pool-size=64M", "--max-connections=300")
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := startChild(cmd)
	if err != nil {
		m.t.Fatalf("testenv: starting mariadbd: %v", err)
	}
	m.proc = proc
	if err := m.waitReady(proc.exited); err != nil {
		m.t.Fatalf("testenv: private MariaDB (log in %s): %v", m.dir, err)
	}
}

// waitReady waits until the server answers a ping, or fails.
func (m *MariaDB) waitReady(exited <-chan struct{}) error {
	db, err := sql.Open("mysql", m.base())
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("mariadbd exited while starting: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd did not answer within 30s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop shuts the server down cleanly (SIGTERM) and waits until it is gone:
// clients see refused connections until Start.
func (m *MariaDB) Stop() {
	m.t.Helper()
	m.stop(syscall.SIGTERM)
}

// kill stops the server with SIGKILL if it runs; for cleanup.
func (m *MariaDB) kill() {
	m.stop(syscall.SIGKILL)
}

// stop sends sig to the server, if it runs, and waits for it to exit.
func (m *MariaDB) stop(sig syscall.Signal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return
	}
	m.proc.stop(sig, 60*time.Second)
	m.proc = nil
}

// freePort returns a TCP port on 127.0.0.1 nobody listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// currentUser is the user mariadbd runs as: the test's own, named
// explicitly because mariadbd refuses to run as root unless told to.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprint(os.Getuid())
}
