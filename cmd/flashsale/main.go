// Command flashsale runs the flash-sale service and its tools:
//
//	flashsale serve      the HTTP service (--strategy picks how orders are taken)
//	flashsale consume    the async pipeline's stream consumers alone
//	flashsale reconcile  compare Redis and MySQL per voucher, and repair
//	flashsale token      print user tokens for testing
//	flashsale jwks       print the JWKS of token --key's keys
//	flashsale bench      the load lab: run a sale and audit it
//	flashsale demo       a small sale per strategy on embedded backends
//	flashsale help       the usage of flashsale or of one command
//	flashsale version    the module version and VCS revision
//
// Every flag has a FLASHSALE_* environment variable (--jwt-secret is
// FLASHSALE_JWT_SECRET); demo reads none. Exit status: 0 on success, 1
// when a command failed, 2 for a usage error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel() // the first signal starts a graceful shutdown
		sig := <-signals
		// The second ends the process at once, by that signal, as if it
		// were not handled; no deferred Close runs, so the embedded
		// backends' files are removed first.
		removeScratch()
		signal.Reset()
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}
