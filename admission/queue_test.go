package admission_test

import (
	"sync"
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
