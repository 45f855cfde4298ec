package store

import (
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestBuyerNumber: a pair is numbered once, whoever asks first among
// concurrent callers, and keeps its number; pairs that differ in case, a
// trailing space, a leading zero or their issuer are numbered apart.
func TestBuyerNumber(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		const iss = "https://id.example.com/realms/shop"
		pairs := [][2]string{
			{iss, "abc"}, {iss, "ABC"}, {iss, "abc "}, {iss, "123"}, {iss, "0123"},
			{iss, "auth0|5f1a"}, {iss + "/", "abc"}, {"https://other.example.com", "abc"},
		}
		const callers = 4
		got := make([][callers]int64, len(pairs))
		var wg sync.WaitGroup
		for i, p := range pairs {
			for c := range callers {
				wg.Go(func() {
					n, err := db.BuyerNumber(t.Context(), p[0], p[1])
					if err != nil {
						t.Errorf("BuyerNumber%q: %v", p, err)
					}
					got[i][c] = n
				})
			}
		}
		wg.Wait()
		seen := map[int64][2]string{}
		for i, p := range pairs {
			n := got[i][0]
			for c := range callers {
				if got[i][c] != n || n <= 0 {
					t.Fatalf("BuyerNumber%q = %v; want one positive number for every caller", p, got[i])
				}
			}
			if q, ok := seen[n]; ok {
				t.Fatalf("BuyerNumber%q = BuyerNumber%q = %d; want two numbers", p, q, n)
			}
			seen[n] = p
			if again, err := db.BuyerNumber(t.Context(), p[0], p[1]); err != nil || again != n {
				t.Fatalf("BuyerNumber%q again = %d, %v; want %d", p, again, err, n)
			}
		}
	})
}

// TestBuyerNumbers: a batch numbers its new subjects and reads the known
// ones, in the order asked, a repeated subject once; two processes'
// overlapping batches, concurrent, agree on every number, and BuyerNumber
// agrees with them; no two subjects share one.
//
// On MariaDB a batch is one upsert RETURNING its numbers; "mysql/two
// statements" runs the same on the path of a MySQL server, which has no
// RETURNING: the upsert, then a locking read.
func TestBuyerNumbers(t *testing.T) {
	type variant struct {
		name      string
		url       func(testing.TB) string
		returning bool
	}
	var variants []variant
	for _, d := range dialects {
		variants = append(variants, variant{d.name, d.url, true})
		if d.name == MySQL {
			variants = append(variants, variant{d.name + "/two statements", d.url, false})
		}
	}
	for _, d := range variants {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			url := d.url(t)
			dbs := []*DB{openDB(t, url)}
			if strings.HasPrefix(d.name, MySQL) { // a SQLite file belongs to one process
				dbs = append(dbs, openDB(t, url))
			}
			for _, db := range dbs {
				if !db.returning {
					t.Fatalf("%s: the server takes no INSERT … RETURNING; these tests run on MariaDB ≥ 10.5", d.name)
				}
				db.returning = d.returning
			}
			const iss = "https://id.example.com"
			known, err := dbs[0].BuyerNumber(t.Context(), iss, "known")
			if err != nil {
				t.Fatal(err)
			}
			const callers = 8
			got := make([][]int64, callers)
			subjects := make([][]string, callers)
			var wg sync.WaitGroup
			for c := range callers {
				// Overlapping: caller c asks for s(c) .. s(c+40), and "known" twice.
				for i := range 40 {
					subjects[c] = append(subjects[c], "s"+strconv.Itoa(c+i))
				}
				subjects[c] = append(subjects[c], "known", "s"+strconv.Itoa(c), "known")
				wg.Go(func() {
					var err error
					if got[c], err = dbs[c%len(dbs)].BuyerNumbers(t.Context(), iss, subjects[c]); err != nil {
						t.Errorf("BuyerNumbers: %v", err)
					}
				})
			}
			wg.Wait()
			checkBuyerNumbers(t, dbs[len(dbs)-1], iss, subjects, got, known)
		})
	}
}

// checkBuyerNumbers checks every answer gives a subject one number, the
// one BuyerNumber gives, and two subjects two numbers.
func checkBuyerNumbers(t *testing.T, db *DB, iss string, subjects [][]string, got [][]int64, known int64) {
	t.Helper()
	bySubject, bySeen := map[string]int64{"known": known}, map[int64]string{known: "known"}
	for c := range subjects {
		if len(got[c]) != len(subjects[c]) {
			t.Fatalf("caller %d: %d numbers for %d subjects", c, len(got[c]), len(subjects[c]))
		}
		for i, s := range subjects[c] {
			n := got[c][i]
			if want, ok := bySubject[s]; ok && n != want || n <= 0 {
				t.Fatalf("caller %d: %q = %d; want %d (positive)", c, s, n, want)
			}
			if other, ok := bySeen[n]; ok && other != s {
				t.Fatalf("%q and %q share number %d", s, other, n)
			}
			bySubject[s], bySeen[n] = n, s
		}
	}
	for s, n := range bySubject {
		if again, err := db.BuyerNumber(t.Context(), iss, s); err != nil || again != n {
			t.Fatalf("BuyerNumber(%q) = %d, %v; want %d", s, again, err, n)
		}
	}
	if _, err := db.BuyerNumbers(t.Context(), iss, make([]string, MaxBuyerBatch+1)); err == nil {
		t.Fatalf("BuyerNumbers of %d subjects: no error; want one", MaxBuyerBatch+1)
	}
}

func TestMariaDBReturning(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true,
		"10.5.0-MariaDB":             true,
		"11.4.2-MariaDB-log":         true,
		"10.4.34-MariaDB":            false,
		"8.0.36":                     false,
		"8.4.0-MySQL":                false,
		"MariaDB":                    false,
	} {
		if got := mariaDBReturning(v); got != want {
			t.Errorf("mariaDBReturning(%q) = %v, want %v", v, got, want)
		}
	}
}
