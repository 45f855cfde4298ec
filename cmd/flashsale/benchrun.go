package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/lab"
)

// The runs of a bench: each strategy's sale on fresh instances, one after
// another or (the demo's second set) all at once, and how their rows are
// printed.

// runSet runs the set of strategies fl.cfg names, with the payment
// secret its rules need (a file in dir for the instances).
func (fl *fleets) runSet(ctx context.Context, authn *auth.Authenticator, dir string, log *slog.Logger, stdout, stderr io.Writer) ([]lab.Row, error) {
	secret, path, err := fl.cfg.rules.paymentSecret(fl.cfg.targets != "", dir)
	if err != nil {
		return nil, err
	}
	fl.paymentFile, fl.paymentSecret = path, secret
	if _, skipped := fl.cfg.rules.keep(stocklockRuns(fl.cfg.strategyList(), fl.cfg.locks.kinds)); len(skipped) > 0 && fl.cfg.targets == "" {
		say(stdout, skippedNote(skipped))
	}
	if fl.cfg.parallel {
		return fl.runParallel(ctx, authn, log, stderr)
	}
	return fl.runAll(ctx, authn, log, stderr)
}

// runAll runs each strategy's sale on fresh instances and returns a row
// per run that is worth showing, with the errors that make the bench fail.
func (fl *fleets) runAll(ctx context.Context, authn *auth.Authenticator, log *slog.Logger, stderr io.Writer) ([]lab.Row, error) {
	var (
		rows []lab.Row
		errs []error
	)
	for _, name := range restrictedRuns(&fl.cfg.rules, fl.cfg.strategyList(), fl.cfg.locks.kinds) {
		for _, adm := range fl.cfg.crowd.admissions() {
			one := *fl // a run of each admission --admission lists
			one.cfg.crowd.admission = adm
			row, shown, err := one.runOne(ctx, name, authn, log, fl.progress(stderr))
			if err != nil {
				errs = append(errs, err)
			}
			if !shown {
				return rows, errors.Join(errs...) // the run broke off
			}
			if len(fl.cfg.crowd.admissions()) > 1 {
				row.Strategy += " " + adm
			}
			rows = append(rows, row)
		}
	}
	return rows, errors.Join(errs...)
}

// progress is how a run shows its progress on stderr: on the demo's
// status line, or a display of its own.
func (fl *fleets) progress(stderr io.Writer) func(string, int) lab.Progress {
	if l := fl.cfg.line; l != nil {
		return func(label string, total int) lab.Progress { return l.Progress(label, total) }
	}
	return func(label string, total int) lab.Progress { return lab.NewProgress(stderr, label, total) }
}

// runOne runs the sale of one strategy on fresh instances. shown says
// whether its row is worth showing: the run did not break off.
func (fl *fleets) runOne(ctx context.Context, name string, authn *auth.Authenticator, log *slog.Logger, progress func(string, int) lab.Progress) (_ lab.Row, shown bool, _ error) {
	cfg, b := fl.cfg, fl.b
	f, err := fl.startWatched(ctx, name) // events.go
	if err != nil {
		return lab.Row{}, false, fmt.Errorf("%s: starting instances: %w", name, err)
	}
	sale := &lab.Sale{
		Strategy: name, Targets: f.urls, AdminToken: fl.admin, Auth: authn, Auditor: lab.NewAuditor(b.db, b.redis, b.prefix), Consumers: f.consumers,
		Stock: cfg.stock, Shards: cfg.shards, Users: cfg.users, Requests: cfg.requests, Doubles: cfg.doubles, Seed: cfg.seed,
		Concurrency: cfg.concurrency, Rate: cfg.rate, Timeout: cfg.timeout, DrainTimeout: cfg.drain, Progress: progress,
	}
	cfg.rules.apply(sale, fl.paymentSecret)
	cfg.crowd.apply(sale, cfg.rules.saleFor)
	log.Info("run starting", "strategy", name, "targets", strings.Join(f.urls, ","))
	row, err := sale.Run(ctx)
	log.Info("run ended", "strategy", name, "voucher", row.VoucherID, "requests", row.Requests, "errors", row.Errors, "err", err)
	fl.auditEvents(ctx, name, row.VoucherID, log)
	if stopErr := f.stop(); stopErr != nil {
		log.Warn("stopping instances", "strategy", name, "err", stopErr)
	}
	if err == nil {
		return row, true, nil
	}
	return row, errors.Is(err, lab.ErrTransport) || errors.Is(err, lab.ErrNotDrained), fmt.Errorf("%s: %w", name, err)
}

// printRuns prints the table of rows (every column if wide; with a
// payment window, what became of the orders too) and the verdicts.
func printRuns(stdout io.Writer, rows []lab.Row, wide bool) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(stdout)
	write := lab.WriteTable
	if wide {
		write = lab.WriteWideTable
	}
	err := write(stdout, rows)
	if !wide && slices.ContainsFunc(rows, func(r lab.Row) bool { return r.Lifecycle != nil }) {
		fmt.Fprintln(stdout)
		err = errors.Join(err, lab.WriteLifecycleTable(stdout, rows))
	}
	if slices.ContainsFunc(rows, func(r lab.Row) bool { return r.Crowd != nil }) {
		fmt.Fprintln(stdout)
		err = errors.Join(err, lab.WriteCrowdTable(stdout, rows))
	}
	fmt.Fprintln(stdout)
	for _, v := range lab.Verdicts(rows) {
		say(stdout, v)
	}
	return err
}
