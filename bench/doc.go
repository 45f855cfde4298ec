// Package bench benchmarks the flashsale lock library
// (github.com/flashsale/flashsale/lock) side by side with its peers —
// go-redsync/redsync, bsm/redislock and rueidis/rueidislock — on the same
// Redis, with the same harness, in one run.
//
// It is a module of its own so the library never depends on its peers.
// Run everything (from this directory) with
//
//	go test -run '^$' -bench . -benchtime 2s -timeout 30m
//
// Two benchmarks, one sub-benchmark per shape and library:
//
//   - BenchmarkUncontended/{serial,parallel64}/<lib>: acquire+release pairs
//     per second, every goroutine on its own key; one goroutine
//     (latency-bound) and 64 goroutines (so client pipelining shows).
//   - BenchmarkContended/<lib>: one key, 64 goroutines in 3 OS processes
//     (22+21+21), for -duration (default 5s) after a common start instant.
//     It reports acquisitions/s, p50/p99 wait, Jain's fairness index over the
//     per-goroutine acquisition counts, retries (a peer gave up and the
//     goroutine tried again) and mutual-exclusion violations (overlapping
//     hold intervals across all processes). It fails on any violation and
//     on any worker failure.
//
// The contended benchmark re-executes the test binary (os.Args[0]) with
// -test.run=^TestWorker$ and BENCH_* environment variables; each worker
// process writes its samples as JSON and the benchmark aggregates them.
// Keys live under "bench:<random>:<lib>:" and are deleted afterwards.
// FLASHSALE_TEST_REDIS points the benchmark at another Redis.
package bench
