// Command testprogress reads `go test -json` on its standard input and
// prints, as the run goes, a line when a package starts and one when it
// ends (ok, FAIL or skipped, with its time), every failed test's output in
// full, a line every minute naming the packages still running, and at the
// end the slowest packages and tests. test.sh pipes its default run
// through it:
//
//	go test -json -race -count=1 ./... | go run ./internal/testprogress
//
// It always exits 0 once its input ends: the run's outcome is go test's
// exit status, which test.sh returns.
package main

import (
	"os"
	"time"
)

func main() {
	p := newProgress(os.Stdout, time.Now)
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.heartbeat()
			case <-stop:
				return
			}
		}
	}()
	p.read(os.Stdin)
	close(stop)
	p.summary()
}
