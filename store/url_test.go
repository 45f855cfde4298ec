package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

func TestOpenBadURL(t *testing.T) {
	tests := []struct {
		name, url string
	}{
		{"empty", ""},
		{"unknown scheme", "postgres://u@localhost/db"},
		{"dsn instead of url", "root@tcp(127.0.0.1:3306)/db"},
		{"mysql without host", "mysql:///db"},
		{"mysql without database", "mysql://root@127.0.0.1:3306"},
		{"mysql with slash only", "mysql://root@127.0.0.1:3306/"},
		{"mysql with nested path", "mysql://root@127.0.0.1:3306/a/b"},
		{"mysql bad pool size", "mysql://root@127.0.0.1:3306/db?max_open_conns=0"},
		{"mysql pool of one", "mysql://root@127.0.0.1:3306/db?max_open_conns=1"},
		{"mysql bad lifetime", "mysql://root@127.0.0.1:3306/db?conn_max_lifetime=soon"},
		{"mysql bad driver param", "mysql://root@127.0.0.1:3306/db?interpolateParams=maybe"},
		{"sqlite without slashes", "sqlite:file.db"},
		{"sqlite without path", "sqlite://"},
		{"sqlite root only", "sqlite:///"},
		{"sqlite with params", "sqlite:///tmp/x.db?mode=ro"},
		{"sqlite memory misspelt", "sqlite://:memory"},
		{"sqlite memory with slashes", "sqlite://:memory:"},
	}
	t.Chdir(t.TempDir()) // a URL wrongly accepted must not leave a file here
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(context.Background(), tt.url)
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("Open(%q) = %v, %v; want an error wrapping ErrBadURL", tt.url, db, err)
			}
			if !strings.Contains(err.Error(), "sqlite::memory:") || !strings.Contains(err.Error(), "mysql://") {
				t.Errorf("error %q does not name the accepted forms", err)
			}
		})
	}
}

func TestBadURLRedactsPassword(t *testing.T) {
	_, err := Open(context.Background(), "mysql://root:s3cret@127.0.0.1:3306/")
	if !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %q: want ErrBadURL without the password", err)
	}
}

func TestParseMySQLURL(t *testing.T) {
	tests := []struct {
		name, url        string
		dsn              string
		maxOpen, maxIdle int
		lifetime         time.Duration
	}{
		{"defaults", "mysql://root@127.0.0.1:3306/shop",
			"root@tcp(127.0.0.1:3306)/shop?clientFoundRows=true&interpolateParams=true&parseTime=true&timeout=5s",
			40, 40, 30 * time.Minute},
		{"default port and password", "mysql://app:p%40ss@db.internal/shop",
			"app:p@ss@tcp(db.internal:3306)/shop?clientFoundRows=true&interpolateParams=true&parseTime=true&timeout=5s",
			40, 40, 30 * time.Minute},
		{"pool and driver params", "mysql://root@h:3307/shop?max_open_conns=64&max_idle_conns=8&conn_max_lifetime=1m&interpolateParams=false&timeout=2s",
			"root@tcp(h:3307)/shop?clientFoundRows=true&parseTime=true&timeout=2s",
			64, 8, time.Minute},
		{"forced params win", "mysql://root@h:3306/shop?parseTime=false&loc=Local",
			"root@tcp(h:3306)/shop?clientFoundRows=true&interpolateParams=true&parseTime=true&timeout=5s",
			40, 40, 30 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseURL(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			got := struct {
				dsn              string
				maxOpen, maxIdle int
				lifetime         time.Duration
			}{c.dsn, c.maxOpen, c.maxIdle, c.maxLifetime}
			want := struct {
				dsn              string
				maxOpen, maxIdle int
				lifetime         time.Duration
			}{tt.dsn, tt.maxOpen, tt.maxIdle, tt.lifetime}
			if got != want {
				t.Errorf("parseURL(%q) =\n %+v, want\n %+v", tt.url, got, want)
			}
		})
	}
}

func TestParseSQLiteURL(t *testing.T) {
	tests := []struct {
		url, file, reader string
	}{
		{"sqlite:///var/lib/fs/shop.db", "file:/var/lib/fs/shop.db?", "file:/var/lib/fs/shop.db?"},
		{"sqlite://shop.db", "file:shop.db?", "file:shop.db?"},
		{"sqlite://data/my shop.db", "file:data/my%20shop.db?", "file:data/my%20shop.db?"},
		{"sqlite::memory:", "file::memory:?", ""},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := parseURL(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(c.dsn, tt.file) || !strings.HasPrefix(c.readDSN, tt.reader) {
				t.Errorf("parseURL(%q) dsn %q reader %q; want prefixes %q and %q", tt.url, c.dsn, c.readDSN, tt.file, tt.reader)
			}
			if c.dialect != SQLite || c.maxOpen != 1 {
				t.Errorf("dialect %q maxOpen %d; want sqlite with one writer connection", c.dialect, c.maxOpen)
			}
		})
	}
}

func TestOpenMissingMySQLDatabase(t *testing.T) {
	existing := testenv.MySQLURL(t)
	url := existing[:strings.LastIndex(existing, "/")+1] + "fs_missing_" + testenv.Unique()
	_, err := Open(context.Background(), url)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Open(%q) = %v; want a database does not exist error", url, err)
	}
}

func TestOpenMemory(t *testing.T) {
	db := openDB(t, "sqlite::memory:")
	createVoucher(t, db, 7, 3)
	err := db.Tx(context.Background(), func(tx *Tx) error {
		_, err := tx.DecrementRemaining(context.Background(), 7, 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := db.Remaining(context.Background(), 7); err != nil || n != 2 {
		t.Fatalf("Remaining = %d, %v; want 2", n, err)
	}
	if db.Dialect() != SQLite {
		t.Errorf("Dialect() = %q", db.Dialect())
	}
}
