package main

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async"
)

func TestDescribeLoss(t *testing.T) {
	noticed := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		loss async.EpochLoss
		want []string
	}{
		{"emptied", async.EpochLoss{Kind: async.LossEmptied, Noticed: noticed, By: "h-1", Previous: "e1", Epoch: "e2", MayBeLost: 7, Vouchers: "42:7"},
			[]string{"redis lost its data: noticed 2026-11-24T10:00:00Z by h-1 (epoch e1 -> e2)", "at most 7", ": 42:7"}},
		{"emptied on a cluster node", async.EpochLoss{Kind: async.LossEmptied, Noticed: noticed, Node: "127.0.0.1:7001", Vouchers: "42:1"},
			[]string{"redis lost its data on cluster node 127.0.0.1:7001: noticed"}},
		{"rewound", async.EpochLoss{Kind: async.LossRewound, Noticed: noticed, By: "h-2", AtLeast: 12, Vouchers: "42:12"},
			[]string{"redis lost accepted orders: noticed 2026-11-24T10:00:00Z by h-2", "at least 12 lost", ": 42:12"}},
		{"rewound on a shard", async.EpochLoss{Kind: async.LossRewound, Noticed: noticed, AtLeast: 3, Vouchers: "42:3", Shard: "42.1"},
			[]string{"redis lost accepted orders on shard 42.1: noticed", "at least 3 lost"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := describeLoss(c.loss)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("describeLoss = %q; want it to contain %q", got, w)
				}
			}
			if strings.Contains(got, "\n") {
				t.Errorf("describeLoss = %q: more than one line", got)
			}
		})
	}
}
