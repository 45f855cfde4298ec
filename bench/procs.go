package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Environment of a worker process. envWorker marks the process as one.
const (
	envWorker     = "BENCH_WORKER"
	envLibrary    = "BENCH_LIBRARY"
	envPrefix     = "BENCH_PREFIX"
	envKey        = "BENCH_KEY"
	envGoroutines = "BENCH_GOROUTINES"
	envStart      = "BENCH_START" // Unix nanoseconds
	envDuration   = "BENCH_DURATION"
	envOut        = "BENCH_OUT"
)

// startDelay is how far ahead the common start instant is set: enough for
// every worker process to start and connect before it.
const startDelay = 3 * time.Second

// workerConfig is what the parent tells one worker process.
type workerConfig struct {
	Library    string
	Prefix     string
	Key        string
	Goroutines int
	Start      time.Time
	Duration   time.Duration
	Out        string // file the worker writes its workerResult to, as JSON
}

// env returns c as the environment of a worker process.
func (c workerConfig) env() []string {
	return []string{
		envWorker + "=1",
		envLibrary + "=" + c.Library,
		envPrefix + "=" + c.Prefix,
		envKey + "=" + c.Key,
		envGoroutines + "=" + strconv.Itoa(c.Goroutines),
		envStart + "=" + strconv.FormatInt(c.Start.UnixNano(), 10),
		envDuration + "=" + c.Duration.String(),
		envOut + "=" + c.Out,
	}
}

// workerConfigFromEnv reads the configuration env wrote. ok is false when
// the process is not a worker.
func workerConfigFromEnv(getenv func(string) string) (c workerConfig, ok bool, err error) {
	if getenv(envWorker) != "1" {
		return c, false, nil
	}
	c = workerConfig{Library: getenv(envLibrary), Prefix: getenv(envPrefix), Key: getenv(envKey), Out: getenv(envOut)}
	var errs []error
	var start int64
	c.Goroutines, err = strconv.Atoi(getenv(envGoroutines))
	errs = append(errs, err)
	start, err = strconv.ParseInt(getenv(envStart), 10, 64)
	errs = append(errs, err)
	c.Start = time.Unix(0, start)
	c.Duration, err = time.ParseDuration(getenv(envDuration))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return c, true, fmt.Errorf("bench: worker environment: %w", err)
	}
	return c, true, nil
}

// work runs the worker process described by c: it opens the library,
// warms it up, contends from the common start and writes its result to
// c.Out.
func work(c workerConfig, addr string) error {
	lib, err := libraryNamed(c.Library)
	if err != nil {
		return err
	}
	l, err := lib.open(addr, c.Prefix)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := warmUp(l, c.Key, c.Goroutines); err != nil {
		return err
	}
	if late := time.Since(c.Start); late > 0 {
		return fmt.Errorf("bench: worker ready %v after the common start; raise startDelay", late)
	}
	r := runWorker(l, c.Key, c.Goroutines, c.Start, c.Duration)
	r.Library = c.Library
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(c.Out, b, 0o644)
}

// spawn runs one contended run of lib in one worker process per entry of
// split (its goroutine count), re-executing exe (the test binary) with
// -test.run=^TestWorker$, and returns every worker's result. A worker that
// fails fails the run, with its output in the error.
func spawn(ctx context.Context, exe, dir, lib, prefix, key string, split []int, d time.Duration) ([]workerResult, error) {
	start := time.Now().Add(startDelay)
	results := make([]workerResult, len(split))
	errs := make([]error, len(split))
	var wg sync.WaitGroup
	for i, n := range split {
		c := workerConfig{
			Library: lib, Prefix: prefix, Key: key, Goroutines: n,
			Start: start, Duration: d, Out: filepath.Join(dir, fmt.Sprintf("worker-%d.json", i)),
		}
		wg.Go(func() { results[i], errs[i] = runProcess(ctx, exe, c) })
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// runProcess runs one worker process and reads its result.
func runProcess(ctx context.Context, exe string, c workerConfig) (workerResult, error) {
	var r workerResult
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), c.env()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("bench: worker %s (%d goroutines): %w\n%s", c.Library, c.Goroutines, err, out.Bytes())
	}
	b, err := os.ReadFile(c.Out)
	if err != nil {
		return r, fmt.Errorf("bench: worker %s wrote no result: %w\n%s", c.Library, err, out.Bytes())
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("bench: worker %s result: %w", c.Library, err)
	}
	return r, nil
}
