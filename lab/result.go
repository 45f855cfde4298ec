package lab

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what a Load's answers said.
type Result struct {
	// Requests counts the requests sent (all of the plan's unless the run
	// was cancelled); Accepted those answered 2xx, Rejected those answered
	// otherwise, by error code, and Errors those with no answer at all
	// (connection refused or reset, timeout, unreadable body).
	Requests int
	Accepted int
	Rejected map[string]int
	Errors   int
	// ErrorSamples holds the first few transport errors, for the log.
	ErrorSamples []error
	// OrderIDs are the order ids the accepted answers named, in the order
	// they arrived.
	OrderIDs []int64
	// TurnedAway are the buyers who were refused (any error code) or got
	// no answer (a transport error) at least once, ascending;
	// TurnedAwayUnits the fewest units each of them asked for when turned
	// away.
	TurnedAway      []int64
	TurnedAwayUnits map[int64]int
	// Latency holds the latency of every answered request, and of every
	// request that timed out (as the time it was given), in µs.
	Latency *hdrhistogram.Histogram
	Elapsed time.Duration
	// PerSecond counts the answered requests in each second of the run
	// (series.go); SoldOut is when the first sold_out answer arrived, from
	// the start (0: none did).
	PerSecond []int
	SoldOut   time.Duration
}

// RPS returns the answered requests per second over the whole run.
func (r *Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests-r.Errors) / r.Elapsed.Seconds()
}

// LatencyMs returns the latency at quantile q (0–100) in milliseconds.
func (r *Result) LatencyMs(q float64) float64 {
	return float64(r.Latency.ValueAtQuantile(q)) / 1000
}

// MaxLatencyMs returns the highest latency in milliseconds.
func (r *Result) MaxLatencyMs() float64 {
	return float64(r.Latency.Max()) / 1000
}

// latencyMax is the highest latency the histogram holds; longer ones are
// recorded as this.
const latencyMax = time.Minute

// maxErrorSamples bounds Result.ErrorSamples.
const maxErrorSamples = 5

// answer is the outcome of one request.
type answer struct {
	user    int64
	units   int // asked for
	orderID int64
	code    string // "" for 2xx
	err     error  // transport error
	latency time.Duration
	// sent says the request left; answered that an HTTP answer came back.
	sent, answered bool
}

// recorder collects answers from many goroutines.
type recorder struct {
	mu         sync.Mutex
	res        Result
	turnedAway map[int64]int // the fewest units asked for
	start      time.Time     // when the run began, for PerSecond
}

func newRecorder() *recorder {
	return &recorder{
		res: Result{
			Rejected: map[string]int{},
			OrderIDs: []int64{},
			Latency:  hdrhistogram.New(1, latencyMax.Microseconds(), 3),
		},
		turnedAway: map[int64]int{},
		start:      time.Now(),
	}
}

func (r *recorder) add(a answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.err != nil {
		r.res.Errors++
		r.turnAway(a)
		if len(r.res.ErrorSamples) < maxErrorSamples {
			r.res.ErrorSamples = append(r.res.ErrorSamples, a.err)
		}
		if isTimeout(a.err) {
			// The buyer waited that long for nothing: leaving it out would
			// flatter the tail exactly when the servers stall.
			_ = r.res.Latency.RecordValue(min(a.latency, latencyMax).Microseconds())
		}
		return
	}
	_ = r.res.Latency.RecordValue(min(a.latency, latencyMax).Microseconds()) // in range by construction
	r.countSecond(a.code)
	if a.code != "" {
		r.res.Rejected[a.code]++
		r.turnAway(a)
		return
	}
	r.res.Accepted++
	if a.orderID != 0 {
		r.res.OrderIDs = append(r.res.OrderIDs, a.orderID)
	}
}

// turnAway notes that a's buyer was turned away. The caller holds r.mu.
func (r *recorder) turnAway(a answer) {
	units := max(a.units, 1)
	if n, ok := r.turnedAway[a.user]; !ok || units < n {
		r.turnedAway[a.user] = units
	}
}

// result returns the Result of a run that sent requests in elapsed.
func (r *recorder) result(requests int, elapsed time.Duration) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Requests = requests
	res.Elapsed = elapsed
	res.TurnedAway = slices.Sorted(maps.Keys(r.turnedAway))
	if res.TurnedAway == nil {
		res.TurnedAway = []int64{}
	}
	res.TurnedAwayUnits = maps.Clone(r.turnedAway)
	return &res
}

// isTimeout reports whether err is a request that ran out of time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
