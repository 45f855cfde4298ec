package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/reconcile"
)

func reconcileCommand(stdout, stderr io.Writer) *ffcli.Command {
	var (
		backendsCfg backendFlags
		logs        logFlags
		durability  durabilityFlags // how durably the half-done returns it finishes are written
	)
	fs := flag.NewFlagSet("flashsale reconcile", flag.ContinueOnError)
	backendsCfg.registerServers(fs)
	logs.register(fs)
	durability.register(fs)
	voucher := fs.Int64("voucher", 0, "reconcile only this voucher (default: every voucher in MySQL)")
	fix := fs.Bool("fix", false, "repair what is safe to repair (re-queue lost orders, give back the stock of dead-lettered ones MySQL had stock for)")
	return &ffcli.Command{
		Name:       "reconcile",
		ShortUsage: "flashsale reconcile --redis URL --db URL [--voucher ID] [--fix]",
		ShortHelp:  "compare the async pipeline's Redis state with MySQL, per voucher",
		LongHelp: "Compares, per voucher, the Redis buyers and stock with the MySQL orders and stock " +
			"(and the orders still in the stream or dead-lettered), with --fix finishes half-done returns too (as durably as " +
			"--durability says, as serve's does); it prints every difference, and with " +
			"--fix repairs the safe ones. Exits non-zero while differences remain unrepaired.",
		FlagSet: fs,
		Options: envOptions(),
		Exec: noArgs(func(ctx context.Context) error {
			if err := cmp.Or(needServers("reconcile", backendsCfg), durability.validate()); err != nil {
				return usage(err)
			}
			if *voucher < 0 {
				return usage(fmt.Errorf("--voucher must be a voucher id, got %d", *voucher))
			}
			log := logs.logger(stderr)
			b, err := openBackends(ctx, backendsCfg, log)
			if err != nil {
				return err
			}
			defer b.Close()
			r := reconcile.New(b.redis, b.db, reconcile.Config{Prefix: b.prefix, Logger: log,
				Returns: async.Returns(b.redis, async.Config{Prefix: b.prefix, Durability: durability.config()})})
			reports, err := reconcileVouchers(ctx, r, *voucher, *fix)
			if err != nil {
				return err
			}
			if err := printEpochs(ctx, stdout, b.redis, b.prefix); err != nil {
				return err
			}
			return printReports(stdout, reports)
		}),
	}
}

// reconcileVouchers checks, or with fix repairs, one voucher (when voucher
// is not 0) or every voucher.
func reconcileVouchers(ctx context.Context, r *reconcile.Reconciler, voucher int64, fix bool) ([]*reconcile.Report, error) {
	if voucher == 0 {
		if fix {
			return r.RepairAll(ctx)
		}
		return r.CheckAll(ctx)
	}
	check := r.Check
	if fix {
		check = r.Repair
	}
	rep, err := check(ctx, voucher)
	if err != nil {
		return nil, err
	}
	return []*reconcile.Report{rep}, nil
}

// printReports prints one line per voucher and one per difference, and
// returns an error counting the differences left unrepaired.
func printReports(w io.Writer, reports []*reconcile.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "voucher\tloaded\tredis stock\tbuyers\tin flight\tdead\tmysql remaining\tmysql orders\tdifferences")
	open := 0
	for _, r := range reports {
		loaded := fmt.Sprint(r.Loaded)
		if r.Retired {
			loaded = "retired"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d/%d\t%d\t%d\t%d\t%d\t%d\t%d\n",
			r.VoucherID, loaded, r.Stock, r.InitialStock, r.Buyers, r.InFlight, r.DeadLetters, r.Remaining, r.Orders, len(r.Diffs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reports {
		for _, d := range r.Diffs {
			state := "open"
			if d.Fixed {
				state = "fixed"
			} else {
				open++
			}
			fmt.Fprintf(w, "  voucher %d %s user=%d order=%d [%s] %s\n", d.VoucherID, d.Kind, d.UserID, d.OrderID, state, d.Detail)
		}
		if r.Moved > 0 {
			fmt.Fprintf(w, "  voucher %d: completed %d moves of stock between its shards\n", r.VoucherID, r.Moved)
		}
	}
	if open > 0 {
		return fmt.Errorf("%d differences left unrepaired", open)
	}
	fmt.Fprintln(w, "no open differences")
	return nil
}
