package store

import (
	"sync"
	"testing"
)

// TestIdentity: a database has one identity, created by the first of
// concurrent callers and kept by every later one; another database has
// another.
func TestIdentity(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		const callers = 8
		ids := make([]string, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { ids[i], errs[i] = db.Identity(t.Context()) })
		}
		wg.Wait()
		for i := range callers {
			if errs[i] != nil || ids[i] != ids[0] || len(ids[0]) != 32 {
				t.Fatalf("Identity %d = %q, %v; want the one 32-character id %q", i, ids[i], errs[i], ids[0])
			}
		}
		again, err := db.Identity(t.Context())
		if err != nil || again != ids[0] {
			t.Errorf("Identity later = %q, %v; want %q", again, err, ids[0])
		}
	})
	for _, d := range dialects {
		t.Run(d.name+"/two databases", func(t *testing.T) {
			a, err := openDB(t, d.url(t)).Identity(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			b, err := openDB(t, d.url(t)).Identity(t.Context())
			if err != nil || a == b {
				t.Errorf("two databases' identities %q and %q, %v; want two", a, b, err)
			}
		})
	}
}

// TestIdentitySurvivesReopen: the identity is the database's, not the
// process's: a reopened database has the same.
func TestIdentitySurvivesReopen(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			url := d.url(t)
			db := openDB(t, url)
			first, err := db.Identity(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			second, err := openDB(t, url).Identity(t.Context())
			if err != nil || second != first {
				t.Errorf("after reopening: %q, %v; want %q", second, err, first)
			}
		})
	}
}
