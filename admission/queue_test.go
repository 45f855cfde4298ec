package admission_test

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/admission"
)

// Early joiners are admitted in a shuffled order, later joiners after
// them in the order they came; joining again gives the same ticket.
func TestEarlyJoinersShuffledLateOnesFirstCome(t *testing.T) {
	const early, late = 200, 20
	e := newEnv(t, 1000, 1000, 3*time.Second)
	tickets := make([]string, early+late+1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for u := 1; u <= early; u++ {
		wg.Go(func() {
			tk := e.join(int64(u))
			mu.Lock()
			tickets[u] = tk.Ticket
			mu.Unlock()
		})
	}
	wg.Wait()
	if again := e.join(7); again.Ticket != tickets[7] || again.State != admission.Waiting {
		t.Fatalf("joining again: %+v, want the ticket %s waiting", again, tickets[7])
	}
	waitFor(e.v.BeginTime.Add(50 * time.Millisecond))
	for u := early + 1; u <= early+late; u++ { // after begin, one by one
		tickets[u] = e.join(int64(u)).Ticket
	}
	order := make([]int, early+late+1) // user -> pass id (1 = first admitted)
	e.admitUntil(func() bool {
		for u := 1; u <= early+late; u++ {
			if order[u] == 0 {
				tk := e.poll(int64(u), tickets[u])
				if tk.State != admission.Admitted {
					return false
				}
				order[u] = passID(t, tk.Pass)
			}
		}
		return true
	})
	for u := early + 1; u <= early+late; u++ {
		if order[u] != u {
			t.Errorf("late joiner %d admitted %d-th, want %d-th (first come after the early ones)", u, order[u], u)
		}
	}
	// Spearman's rho of join order against admission order, for the early
	// ones: about 0 ± 0.07 for a shuffle; the join order itself is 1.
	var d2 float64
	for u := 1; u <= early; u++ {
		d := float64(order[u] - u)
		d2 += d * d
	}
	n := float64(early)
	if rho := 1 - 6*d2/(n*(n*n-1)); rho > 0.3 || rho < -0.3 {
		t.Errorf("early joiners' admission order correlates with their join order: rho %.2f", rho)
	}
}

// At most admit_per_second passes in any window of one second, with two
// instances stepping at once, and never more unused passes than units.
func TestRateAndUnitsBound(t *testing.T) {
	const rate, users = 50, 400
	e := newEnv(t, 120, rate, 0)
	q2 := e.newQueue(e.client)
	tickets := make([]string, users+1)
	for u := 1; u <= users; u++ {
		tickets[u] = e.join(int64(u)).Ticket
	}
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for _, q := range []*admission.Queue{e.q, q2} {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if _, err := q.Admit(e.ctx, e.v.ID); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(7 * time.Millisecond)
			}
		})
	}
	var maxSecond, maxUnused int64
	for time.Now().Before(stop) {
		s, err := e.q.Stats(e.ctx, e.v.ID)
		if err != nil {
			t.Fatal(err)
		}
		maxSecond, maxUnused = max(maxSecond, s.AdmittedLastSecond), max(maxUnused, s.Unused)
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	s, _ := e.q.Stats(e.ctx, e.v.ID)
	t.Logf("admitted %d, most in a second %d, most unused %d", s.Admitted, maxSecond, maxUnused)
	if maxSecond > rate {
		t.Errorf("%d passes in one second, above the rate %d", maxSecond, rate)
	}
	if s.Admitted != 120 || maxUnused > 120 {
		t.Errorf("admitted %d (most unused %d), want 120 = the units", s.Admitted, maxUnused)
	}
}

// Every pass's admission time (its expiry less the pass TTL, by Redis's
// clock) is exact: no window of one second holds more than
// admit_per_second of them, and no tenth of a second more than a tenth of
// a second's worth saved up plus its own, with two instances stepping at
// once as fast as they can.
func TestRateExactByRedisClock(t *testing.T) {
	const rate, users = 40, 160
	e := newEnv(t, 1000, rate, 0)
	q2 := e.newQueue(e.client)
	tickets := make([]string, users+1)
	for u := 1; u <= users; u++ {
		tickets[u] = e.join(int64(u)).Ticket
	}
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for _, q := range []*admission.Queue{e.q, q2} {
		wg.Go(func() {
			for admitted.Load() < users {
				s, err := q.Admit(e.ctx, e.v.ID)
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(int64(s.Admitted))
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	at := make([]int64, 0, users) // admission times, ms by Redis's clock
	for u := 1; u <= users; u++ {
		tk := e.poll(int64(u), tickets[u])
		if tk.State != admission.Admitted {
			t.Fatalf("user %d: %q after every pass was handed out", u, tk.State)
		}
		at = append(at, passExpiry(t, tk.Pass)-time.Minute.Milliseconds())
	}
	slices.Sort(at)
	for i := range at {
		if j := i + rate; j < len(at) && at[j]-at[i] < 1000 {
			t.Fatalf("%d passes admitted from %d ms to %d ms: more than %d in one second", rate+1, at[i], at[j], rate)
		}
		if j := i + 2*rate/10 + 1; j < len(at) && at[j]-at[i] < 100 {
			t.Fatalf("passes %d..%d admitted within %d ms: a burst", i, j, at[j]-at[i])
		}
	}
	if span := at[len(at)-1] - at[0]; span < 1000*(users/rate-1) {
		t.Errorf("%d passes over %d ms, faster than %d a second", users, span, rate)
	}
}

// passExpiry returns the expiry (Unix ms) in a pass.
func passExpiry(t testing.TB, pass string) int64 {
	t.Helper()
	f := strings.Split(pass, ".")
	if len(f) != 4 {
		t.Fatalf("pass %q has not 4 fields", pass)
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// One step may admit thousands (admit.lua writes them 500 to a command):
// each gets its own pass, numbered 1..n.
func TestLargeStep(t *testing.T) {
	const users = 1200
	e := newEnv(t, 5000, 100_000, 0)
	tickets := make([]string, users+1)
	var wg sync.WaitGroup
	for u := 1; u <= users; u++ {
		wg.Go(func() { tickets[u] = e.join(int64(u)).Ticket })
	}
	wg.Wait()
	waitFor(e.v.BeginTime.Add(200 * time.Millisecond))
	s, err := e.q.Admit(e.ctx, e.v.ID)
	if err != nil || s.Admitted != users {
		t.Fatalf("one step admitted %d (%v), want %d", s.Admitted, err, users)
	}
	seen := map[int]bool{}
	for u := 1; u <= users; u++ {
		tk := e.poll(int64(u), tickets[u])
		id := passID(t, tk.Pass)
		if tk.State != admission.Admitted || id < 1 || id > users || seen[id] {
			t.Fatalf("user %d: %q with pass id %d", u, tk.State, id)
		}
		seen[id] = true
	}
}
