package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/async"
)

// admissionFlags configure the waiting room of queue vouchers.
type admissionFlags struct {
	passTTL    time.Duration
	admitEvery time.Duration
}

func (f *admissionFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.passTTL, "pass-ttl", 60*time.Second, "how long a queue voucher's purchase pass is valid; one that runs out unused gives its place back")
	fs.DurationVar(&f.admitEvery, "admit-every", 100*time.Millisecond, "how often each instance runs a step of admission (the rate is the voucher's admit_per_second whatever this is)")
}

func (f *admissionFlags) validate() error {
	if f.passTTL < time.Second || f.passTTL > time.Hour {
		return errors.New("--pass-ttl must be 1s to 1h")
	}
	if f.admitEvery < 10*time.Millisecond || f.admitEvery > time.Second {
		return errors.New("--admit-every must be 10ms to 1s")
	}
	return nil
}

// newQueue builds the waiting room over b: tickets and passes signed with
// a key derived from the JWT secret; the units left read from the gate for
// async, from MySQL for the others.
func newQueue(cfg serveConfig, b *backends) (*admission.Queue, error) {
	secret, err := cfg.jwtSecret.value()
	if err != nil {
		return nil, err
	}
	units := func(ctx context.Context, id int64) (int, error) {
		v, err := b.db.Voucher(ctx, id)
		if err != nil {
			return 0, err
		}
		return v.Remaining, nil
	}
	if cfg.strategy == "async" {
		units = func(ctx context.Context, id int64) (int, error) {
			st, err := async.ReadState(ctx, b.redis, b.prefix, id)
			if err != nil || !st.Loaded {
				return 0, errors.Join(err, errors.New("admission: the voucher is not in the gate"))
			}
			return st.Stock, nil
		}
	}
	return admission.New(b.redis, admission.Config{
		Prefix:     b.prefix,
		Secret:     []byte(secret),
		Vouchers:   b.db,
		Units:      units,
		PassTTL:    cfg.admission.passTTL,
		AdmitEvery: cfg.admission.admitEvery,
	})
}
