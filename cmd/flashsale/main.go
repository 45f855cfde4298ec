// Command flashsale runs the flash-sale service and its tools:
//
//	flashsale serve      the HTTP service (--strategy picks how orders are taken)
//	flashsale consume    the async pipeline's stream consumers alone
//	flashsale reconcile  compare Redis and MySQL per voucher, and repair
//	flashsale token      print user tokens for testing
//	flashsale bench      the load lab: run a sale and audit it
//	flashsale demo       a small sale per strategy on embedded backends
//
// Every flag has a FLASHSALE_* environment variable (--jwt-secret is
// FLASHSALE_JWT_SECRET).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown; with the handler gone, a
	// second one ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		if err != flag.ErrHelp {
			fmt.Fprintln(os.Stderr, "flashsale:", err)
		}
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}

// run parses args and runs the chosen command until it ends or ctx is
// cancelled.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &ffcli.Command{
		ShortUsage: "flashsale <command> [flags]",
		ShortHelp:  "a flash-sale service on Redis and MySQL, and its load lab",
		Subcommands: []*ffcli.Command{
			serveCommand(stdout, stderr),
			consumeCommand(stdout, stderr),
			reconcileCommand(stdout, stderr),
			tokenCommand(stdout),
			benchCommand(stdout, stderr),
			demoCommand(stdout, stderr),
		},
		Exec: func(context.Context, []string) error { return flag.ErrHelp },
	}
	root.FlagSet = flag.NewFlagSet("flashsale", flag.ContinueOnError)
	root.FlagSet.SetOutput(stderr)
	for _, c := range root.Subcommands {
		c.FlagSet.SetOutput(stderr)
	}
	return root.ParseAndRun(ctx, args)
}

// noArgs adapts exec to an ffcli Exec that refuses arguments left after
// the flags: the flag package stops at the first word that is not a flag
// (a bare "false" after a boolean flag), and every flag after it would be
// dropped without a word. The error wraps flag.ErrHelp, a usage error.
func noArgs(exec func(ctx context.Context) error) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: unexpected argument %q; the flags after it were not read (write a boolean as --flag=false)", flag.ErrHelp, args[0])
		}
		return exec(ctx)
	}
}

// envOptions makes every flag settable as FLASHSALE_<FLAG> (dashes become
// underscores).
func envOptions() []ff.Option {
	return []ff.Option{ff.WithEnvVarPrefix("FLASHSALE")}
}
