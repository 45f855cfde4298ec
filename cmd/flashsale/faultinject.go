package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lifecycle"
)

// Faults the tests inject into real processes through the environment, to
// kill an instance at a chosen point. Nothing reads them but the tests.

// returnDelayEnv delays the second half of every return (into the gate's
// stock) by its duration: an instance killed meanwhile has expired or
// cancelled orders in MySQL whose units are not back in Redis.
const returnDelayEnv = "FLASHSALE_FAULT_RETURN_DELAY"

// withFaults returns r, delayed as returnDelayEnv says.
func withFaults(r lifecycle.Restocker) (lifecycle.Restocker, error) {
	v := os.Getenv(returnDelayEnv)
	if v == "" {
		return r, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", returnDelayEnv, err)
	}
	return slowReturns{r, d}, nil
}

// slowReturns waits before every restock.
type slowReturns struct {
	lifecycle.Restocker
	delay time.Duration
}

func (s slowReturns) Restock(ctx context.Context, orders []*flashsale.Order) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Restocker.Restock(ctx, orders)
}
