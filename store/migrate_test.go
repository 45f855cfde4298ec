package store

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// wantMigratedOnce fails the test unless goose recorded each migration once.
func wantMigratedOnce(t *testing.T, db *DB) {
	t.Helper()
	rows, err := db.writer.QueryContext(t.Context(), "SELECT version_id, COUNT(*) FROM goose_db_version GROUP BY version_id ORDER BY version_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []int64
	for rows.Next() {
		var v, n int64
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("migration %d recorded %d times", v, n)
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// goose records version 0 for its own table, then one per file.
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0}
	for _, f := range files {
		n, err := strconv.ParseInt(strings.SplitN(path.Base(f), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		want = append(want, n)
	}
	want = append(want, stockEventsVersion, outboxBatchesVersion, oneTriggerVersion, placedOnInsertVersion) // Go migrations (stocktriggers.go, outboxtriggers.go)
	slices.Sort(want)
	if !slices.Equal(versions, want) {
		t.Errorf("recorded versions %v, want %v", versions, want)
	}
}

// TestConcurrentOpen opens one database from several goroutines at once, as
// instances starting together do: every Open succeeds and the migrations
// run once.
func TestConcurrentOpen(t *testing.T) {
	const instances = 5
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			url := d.url(t)
			dbs := make([]*DB, instances)
			errs := make([]error, instances)
			var wg sync.WaitGroup
			for i := range instances {
				wg.Go(func() { dbs[i], errs[i] = Open(context.Background(), url) })
			}
			wg.Wait()
			for i := range instances {
				if errs[i] != nil {
					t.Fatalf("Open %d: %v", i, errs[i])
				}
				t.Cleanup(func() { dbs[i].Close() })
			}
			wantMigratedOnce(t, dbs[0])
			createVoucher(t, dbs[1], 1, 5)
			wantRemaining(t, dbs[instances-1], 1, 5)
		})
	}
}

// openURLEnv tells the test binary, started again by TestOpenFromProcesses,
// to open this URL in TestHelperOpen.
const openURLEnv = "FLASHSALE_STORE_TEST_OPEN_URL"

// TestOpenFromProcesses starts three processes that open one MySQL database
// at once, as three service instances do: all succeed, and the migrations
// run once.
func TestOpenFromProcesses(t *testing.T) {
	const processes = 3
	url := dialects[0].url(t)
	cmds := make([]*exec.Cmd, processes)
	outs := make([]bytes.Buffer, processes)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperOpen$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), openURLEnv+"="+url)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i].String())
		}
	}
	wantMigratedOnce(t, openDB(t, url))
}

// TestHelperOpen is not a test: it opens the database named by openURLEnv
// for TestOpenFromProcesses, and passes when no URL is set.
func TestHelperOpen(t *testing.T) {
	url := os.Getenv(openURLEnv)
	if url == "" {
		return
	}
	db, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
