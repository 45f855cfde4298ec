package async_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestClaimPrefix: the first database to claim a prefix owns it, later
// checks of the same database pass, another database is refused with
// both named, and a claim Redis lost is made again.
func TestClaimPrefix(t *testing.T) {
	client, prefix := testenv.Redis(t)
	live := async.Owner{ID: "live-id", Database: "mysql://db/live"}
	staging := async.Owner{ID: "staging-id", Database: "mysql://db/staging"}
	steps := []struct {
		name        string
		me          async.Owner
		lost        bool // Redis lost its data first
		wantClaimed bool
		wantOwned   bool
	}{
		{"first use claims", live, false, true, false},
		{"the same database again", live, false, false, false},
		{"another database is refused", staging, false, false, true},
		{"a claim Redis lost is made again", staging, true, true, false},
		{"by the database that checked first", live, false, false, true},
	}
	for _, s := range steps {
		if s.lost {
			if err := testenv.DeletePrefix(t.Context(), client, prefix); err != nil {
				t.Fatal(err)
			}
		}
		claimed, err := async.ClaimPrefix(t.Context(), client, prefix, s.me)
		owned, isOwned := errors.AsType[*async.PrefixOwnedError](err)
		if claimed != s.wantClaimed || isOwned != s.wantOwned || (err != nil) != s.wantOwned {
			t.Fatalf("%s: ClaimPrefix = %v, %v; want claimed %v, refused %v", s.name, claimed, err, s.wantClaimed, s.wantOwned)
		}
		if isOwned {
			msg := err.Error()
			if !errors.Is(err, async.ErrPrefixOwned) || owned.Mine.ID != s.me.ID || owned.Owner.ID == s.me.ID ||
				!strings.Contains(msg, prefix) || !strings.Contains(msg, "live-id (mysql://db/live)") || !strings.Contains(msg, "staging-id (mysql://db/staging)") {
				t.Errorf("%s: %v; want the prefix and both databases named", s.name, err)
			}
		}
	}
}

// TestClaimPrefixConcurrently: databases claiming one unclaimed prefix at
// once: exactly one wins, every other is refused naming it.
func TestClaimPrefixConcurrently(t *testing.T) {
	client, prefix := testenv.Redis(t)
	const dbs = 8
	claimed := make([]bool, dbs)
	errs := make([]error, dbs)
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() {
			claimed[i], errs[i] = async.ClaimPrefix(t.Context(), client, prefix, async.Owner{ID: string(rune('a' + i))})
		})
	}
	wg.Wait()
	winner := -1
	for i := range dbs {
		if claimed[i] {
			if winner >= 0 || errs[i] != nil {
				t.Fatalf("claims %v, errors %v; want one claim", claimed, errs)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("claims %v, errors %v; want one claim", claimed, errs)
	}
	for i := range dbs {
		owned, ok := errors.AsType[*async.PrefixOwnedError](errs[i])
		if i != winner && (!ok || owned.Owner.ID != string(rune('a'+winner))) {
			t.Errorf("claim %d: %v; want refused, naming %c", i, errs[i], 'a'+winner)
		}
	}
}
