// Command flashsale runs the flash-sale service and its tools:
//
//	flashsale serve      the HTTP service (--strategy picks how orders are taken)
//	flashsale consume    the async pipeline's stream consumers alone
//	flashsale reconcile  compare Redis and MySQL per voucher, and repair
//	flashsale token      print user tokens for testing
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown; with the handler gone, a
	// second one ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
