package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale/async"
)

// consumerFlags configure the async pipeline's stream consumer.
type consumerFlags struct {
	name      string
	batch     int
	claimIdle time.Duration
	maxDeliv  int64
}

func (f *consumerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "consumer-name", "", "this consumer's name in the group (default hostname-pid-random; must be unique per process)")
	fs.IntVar(&f.batch, "batch", 500, "orders per read and per MySQL transaction")
	fs.DurationVar(&f.claimIdle, "claim-idle", 30*time.Second, "take over entries a dead consumer left unacknowledged this long")
	fs.Int64Var(&f.maxDeliv, "max-deliveries", 5, "persist an entry delivered more than this many times on its own; dead-letter it when that many attempts on its own died")
}

func (f *consumerFlags) new(b *backends, log *slog.Logger) *async.Consumer {
	return async.NewConsumer(b.redis, b.db, async.ConsumerConfig{
		Prefix:        b.prefix,
		Name:          f.name,
		BatchSize:     f.batch,
		ClaimIdle:     f.claimIdle,
		MaxDeliveries: f.maxDeliv,
		Logger:        log,
	})
}

func consumeCommand(stdout, stderr io.Writer) *ffcli.Command {
	var (
		backendsCfg backendFlags
		consumerCfg consumerFlags
	)
	fs := flag.NewFlagSet("flashsale consume", flag.ContinueOnError)
	backendsCfg.register(fs)
	consumerCfg.register(fs)
	return &ffcli.Command{
		Name:       "consume",
		ShortUsage: "flashsale consume [flags]",
		ShortHelp:  "persist the async pipeline's accepted orders to MySQL (no HTTP)",
		FlagSet:    fs,
		Options:    envOptions(),
		Exec: func(ctx context.Context, _ []string) error {
			log := slog.New(slog.NewTextHandler(stderr, nil))
			b, err := openBackends(ctx, backendsCfg, log)
			if err != nil {
				return err
			}
			defer b.Close()
			c := consumerCfg.new(b, log)
			fmt.Fprintf(stdout, "flashsale: consuming as %s\n", c.Name())
			err = c.Run(ctx)
			s := c.Stats()
			fmt.Fprintf(stdout, "flashsale: consumer %s stopped: %d persisted, %d already present, %d dead-lettered, %d claimed\n",
				c.Name(), s.Persisted, s.AlreadyPresent, s.DeadLettered, s.Claimed)
			return err
		},
	}
}
