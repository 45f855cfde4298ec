package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale/async"
	"github.com/redis/rueidis"
)

// epochEvery is how often serve checks whether Redis lost its data. The
// orders this instance accepted in one interval bound what it can say
// about the loss, so it is short; a check is one pipeline of a script per
// voucher sold here and one of a script per epoch key (one, or on Redis
// Cluster one per master, after a CLUSTER SLOTS).
const epochEvery = time.Second

// watchEpoch reads Redis's epoch once (so the instance knows it before it
// takes orders) and then watches it in the background; the returned func
// stops the watch and waits for it.
func watchEpoch(svc *async.Service, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := svc.CheckEpoch(ctx); err != nil {
		log.Warn("reading Redis's epoch at start; retrying in the background", "err", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { svc.WatchEpoch(ctx, epochEvery) })
	return func() { cancel(); wg.Wait() }
}

// printEpochs prints the data losses of Redis that services recorded, or
// that Redis holds no epoch at all.
func printEpochs(ctx context.Context, w io.Writer, client rueidis.Client, prefix string) error {
	current, losses, err := async.ReadEpochs(ctx, client, prefix)
	if err != nil {
		return err
	}
	if current == "" {
		fmt.Fprintln(w, "redis epoch: none (no async service has run since Redis was emptied; if one ran before, Redis lost its data and the orders it had not persisted)")
	}
	for _, l := range losses {
		fmt.Fprintln(w, describeLoss(l))
	}
	return nil
}

// describeLoss is the line reconcile prints for one recorded loss.
func describeLoss(l async.EpochLoss) string {
	noticed := l.Noticed.UTC().Format(time.RFC3339)
	if l.Kind == async.LossRewound {
		where := ""
		if l.Shard != "" {
			where = " on shard " + l.Shard
		}
		return fmt.Sprintf("redis lost accepted orders%s: noticed %s by %s that Redis went back in time (a failover to a replica that lagged?); at least %d lost (voucher:at least): %s",
			where, noticed, l.By, l.AtLeast, l.Vouchers)
	}
	node := ""
	if l.Node != "" {
		node = " on cluster node " + l.Node
	}
	return fmt.Sprintf("redis lost its data%s: noticed %s by %s (epoch %s -> %s); accepted orders not persisted then, at most %d as that instance knows: %s",
		node, noticed, l.By, l.Previous, l.Epoch, l.MayBeLost, l.Vouchers)
}
