package lab

import (
	"fmt"
	"math/rand/v2"
)

// Shot is one buyer's click, or double click: Clicks requests of User sent
// at the same instant, none waiting for another's answer, each asking for
// Quantity units.
type Shot struct {
	User   int64
	Clicks int // 1 or 2
	// Quantity is the units each click asks for; 0 sends no body, which
	// the servers take as 1.
	Quantity int
}

// Units returns Quantity, or 1 when it is 0.
func (s Shot) Units() int { return max(s.Quantity, 1) }

// Quantities gives each shot a quantity drawn uniformly from 1..most by
// seed (the same arguments always give the same quantities); with most 1
// or less the shots keep Quantity 0, and their requests send no body.
func Quantities(shots []Shot, most int, seed uint64) {
	if most <= 1 {
		return
	}
	rng := rand.New(rand.NewPCG(seed, uint64(most)<<32|uint64(len(shots))))
	for i := range shots {
		shots[i].Quantity = 1 + rng.IntN(most)
	}
}

// Plan returns the shots of a sale: requests order attempts spread evenly
// over users buyers (ids 1..users; each gets requests/users attempts, the
// first requests%users one more), grouped into shots, in an order shuffled
// by seed. A buyer's shot is a double click with probability doubles while
// the buyer has two or more attempts left. The same arguments always give
// the same plan.
func Plan(users, requests int, doubles float64, seed uint64) ([]Shot, error) {
	switch {
	case users <= 0:
		return nil, fmt.Errorf("lab: users must be positive, got %d", users)
	case requests < users:
		return nil, fmt.Errorf("lab: requests (%d) must be at least users (%d), so every buyer tries", requests, users)
	case doubles < 0 || doubles > 1:
		return nil, fmt.Errorf("lab: the double-click fraction must be within [0, 1], got %g", doubles)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(users)<<32|uint64(requests)))
	shots := make([]Shot, 0, requests)
	for u := range users {
		left := requests / users
		if u < requests%users {
			left++
		}
		for left > 0 {
			clicks := 1
			if left >= 2 && rng.Float64() < doubles {
				clicks = 2
			}
			shots = append(shots, Shot{User: int64(u + 1), Clicks: clicks})
			left -= clicks
		}
	}
	rng.Shuffle(len(shots), func(i, j int) { shots[i], shots[j] = shots[j], shots[i] })
	return shots, nil
}

// countRequests returns the number of requests in shots.
func countRequests(shots []Shot) int {
	n := 0
	for _, s := range shots {
		n += s.Clicks
	}
	return n
}
