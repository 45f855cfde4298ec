package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/eventbench"
	"github.com/flashsale/flashsale/lab"
)

// fleets starts the instances a strategy's run loads.
type fleets struct {
	cfg           benchConfig
	b             *backends
	logDir        string
	secret, admin string
	// paymentFile holds paymentSecret, the instances' payment webhook
	// secret, when the sale has a payment window (benchrules.go).
	paymentFile   string
	paymentSecret []byte
	// id tells this bench's consumer names from any other's.
	id     string
	events *eventbench.Watch // --events: this run's (events.go)
}

// fleet is one strategy's running instances.
type fleet struct {
	urls []string
	// consumers are the names of the instances' consumers; nil for
	// targets, whose consumers bench does not know.
	consumers []string
	stop      func() error
}

// consumerName is the --consumer-name of the strategy's i-th instance:
// the lab notices a consumer it did not start by its name.
func (fl *fleets) consumerName(strategy string, i int) string {
	return fmt.Sprintf("bench-%s-%s-%d", fl.id, strategy, i+1)
}

// inProcess reports whether the instances run in this process: when a
// backend is embedded (it lives in this process) or the database is a
// SQLite file (one process's database).
func (fl *fleets) inProcess() bool {
	return fl.cfg.backends.Embedded() || strings.HasPrefix(fl.cfg.backends.db, "sqlite:")
}

// mode is how the instances run: a lab.Setup mode.
func (fl *fleets) mode() string {
	switch {
	case fl.cfg.targets != "":
		return lab.ModeTargets
	case fl.inProcess():
		return lab.ModeInProcess
	}
	return lab.ModeProcesses
}

// redis and db say where the backends are, passwords hidden.
func (fl *fleets) redis() string {
	if fl.cfg.backends.redis == "" {
		return "embedded (miniredis, in this process) at " + fl.b.redisURL
	}
	return redact(fl.b.redisURL)
}

func (fl *fleets) db() string {
	if fl.cfg.backends.db == "" {
		return "embedded SQLite " + fl.b.dbURL
	}
	return redact(fl.b.dbURL)
}

// describe says how the instances run, and on what.
func (fl *fleets) describe() string {
	on := fmt.Sprintf("Redis %s and database %s", fl.redis(), fl.db())
	switch fl.mode() {
	case lab.ModeTargets:
		return fmt.Sprintf("mode: targets — %d running server(s) (%s), audited on %s",
			len(fl.cfg.targetList()), strings.Join(fl.cfg.targetList(), ", "), on)
	case lab.ModeInProcess:
		return fmt.Sprintf("mode: in-process — %d instances per strategy inside this process (each with its own strategy, mutexes and lock client), on %s",
			fl.cfg.instances, on)
	}
	return fmt.Sprintf("mode: processes — %d `flashsale serve` child processes per strategy, on %s", fl.cfg.instances, on)
}

// redact hides a URL's password.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.User != nil && u.Opaque == "" {
		return u.Redacted()
	}
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		return "…" + raw[at:] // not a URL with user info: what precedes may hold a password
	}
	return raw
}

// serveArgs are the serve flags of an instance of the strategy, backends
// and secrets excepted.
func (fl *fleets) serveArgs(run string) []string {
	strategy, lockKind := runStrategy(run)
	var locks []string
	if strategy == "stocklock" {
		locks = fl.cfg.locks.args(lockKind)
	}
	if fl.paymentFile != "" {
		locks = append(locks, "--payment-secret-file", fl.paymentFile)
	}
	if fl.cfg.crowd.on() {
		locks = append(locks, "--trust-proxy") // the crowd's X-Forwarded-For: an address per account
	}
	if fl.events != nil {
		locks = append(locks, "--events-nats", fl.cfg.events.nats, "--events-subject", fl.events.Subject, "--events-stream", fl.events.Stream)
	}
	return append(locks,
		"--addr", "127.0.0.1:0",
		"--strategy", strategy,
		"--race-window", fl.cfg.raceWindow.String(),
		"--rate-limit-user", strconv.FormatFloat(fl.cfg.rateUser, 'g', -1, 64),
		"--rate-limit-ip", strconv.FormatFloat(fl.cfg.rateIP, 'g', -1, 64),
		"--lock-wait", fl.cfg.lockWait.String(),
		"--shutdown-timeout", "10s",
	)
}

// processArgs returns the command line and the environment of an
// instance process of the strategy: the secrets and the backends' URLs
// in the environment only.
func (fl *fleets) processArgs(strategy string) (args, env []string) {
	env = []string{"FLASHSALE_JWT_SECRET=" + fl.secret, "FLASHSALE_ADMIN_TOKEN=" + fl.admin,
		"FLASHSALE_REDIS=" + fl.b.redisURL, "FLASHSALE_REDIS_PREFIX=" + fl.b.prefix, "FLASHSALE_DB=" + fl.b.dbURL}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLASHSALE_") {
			env = append(env, kv)
		}
	}
	return append([]string{"serve"}, fl.serveArgs(strategy)...), env
}

// start starts the strategy's instances (or names the targets).
func (fl *fleets) start(ctx context.Context, strategy string) (*fleet, error) {
	switch {
	case fl.cfg.targets != "":
		return &fleet{urls: fl.cfg.targetList(), stop: func() error { return nil }}, nil
	case fl.inProcess():
		return fl.startInProcess(ctx, strategy)
	default:
		return fl.startProcesses(ctx, strategy)
	}
}

// startInProcess starts the instances in this process on the shared
// backends, each logging to its own file.
func (fl *fleets) startInProcess(ctx context.Context, strategy string) (_ *fleet, err error) {
	var cfg serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg.register(fs) // the serve defaults for everything not set here
	if err := fs.Parse(append(fl.serveArgs(strategy), "--jwt-secret", fl.secret, "--admin-token", fl.admin)); err != nil {
		return nil, err
	}
	var (
		insts []*instance
		files []*os.File
		names []string
	)
	stop := func() error {
		var errs []error
		for _, inst := range insts {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			errs = append(errs, inst.Stop(sctx))
			cancel()
		}
		for _, f := range files {
			f.Close()
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			stop() //nolint:errcheck // the start failed; that error is the one to report
		}
	}()
	for i := range fl.cfg.instances {
		f, err := os.Create(filepath.Join(fl.logDir, fmt.Sprintf("%s-%d.log", strategy, i+1)))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		icfg := cfg
		icfg.consumer.name = fl.consumerName(strategy, i)
		names = append(names, icfg.consumer.name)
		inst, err := startInstance(icfg, fl.b, slog.New(slog.NewTextHandler(f, nil)))
		if err != nil {
			return nil, fmt.Errorf("instance %d (log %s): %w", i+1, f.Name(), err)
		}
		insts = append(insts, inst)
		rctx, cancel := context.WithTimeout(ctx, fl.cfg.startup)
		err = lab.WaitReady(rctx, inst.URL)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("instance %d (log %s): %w", i+1, f.Name(), err)
		}
	}
	urls := make([]string, len(insts))
	for i, inst := range insts {
		urls[i] = inst.URL
	}
	return &fleet{urls: urls, consumers: names, stop: stop}, nil
}

// startProcesses starts the instances as child processes of the server
// binary. The secrets, and the backends' URLs (which may hold
// passwords), go in the environment, not on command lines that ps and
// /debug/pprof/cmdline show; the parent's other FLASHSALE_* variables are left out, so the
// children run exactly the flags given.
func (fl *fleets) startProcesses(ctx context.Context, strategy string) (_ *fleet, err error) {
	exe := fl.cfg.serverBin
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding this binary to start instances with (set --server-bin): %w", err)
		}
	}
	args, env := fl.processArgs(strategy)
	var (
		procs []*lab.Process
		names []string
	)
	stop := func() error {
		var errs []error
		for _, p := range procs {
			errs = append(errs, p.Stop(15*time.Second))
		}
		return errors.Join(errs...)
	}
	for i := range fl.cfg.instances {
		names = append(names, fl.consumerName(strategy, i))
		cmd := exec.Command(exe, append(args, "--consumer-name", names[i])...)
		cmd.Env = env
		p, err := lab.StartProcess(ctx, cmd, filepath.Join(fl.logDir, fmt.Sprintf("%s-%d.log", strategy, i+1)), fl.cfg.startup)
		if err != nil {
			stop() //nolint:errcheck // the start failed; that error is the one to report
			return nil, fmt.Errorf("instance %d: %w", i+1, err)
		}
		procs = append(procs, p)
	}
	urls := make([]string, len(procs))
	for i, p := range procs {
		urls[i] = p.URL
	}
	return &fleet{urls: urls, consumers: names, stop: stop}, nil
}
