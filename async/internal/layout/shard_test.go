package layout

import (
	"strconv"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

func TestShardTagsSpreadOverSlotRanges(t *testing.T) {
	for _, k := range []int{1, 2, 3, 4, 6, 64} {
		for _, id := range []int64{1, 42, 1 << 40, 9_000_000_000_000_000_000} {
			tags := ShardTags(id, k)
			if len(tags) != k || tags[0] != strconv.FormatInt(id, 10) {
				t.Fatalf("ShardTags(%d, %d) = %v", id, k, tags)
			}
			segments := map[int]bool{}
			for _, tag := range tags {
				segments[testenv.Slot("{v"+tag+"}:meta")*k/16384] = true
			}
			if len(segments) != k {
				t.Errorf("ShardTags(%d, %d) = %v: %d of %d slot ranges", id, k, tags, len(segments), k)
			}
		}
	}
}

func TestHomeShardSpreadsBuyers(t *testing.T) {
	const k, n = 3, 30000
	counts := make([]int, k)
	for u := int64(1); u <= n; u++ {
		counts[HomeShard(u, k)]++
	}
	for s, c := range counts {
		if c < n/k*9/10 || c > n/k*11/10 {
			t.Errorf("shard %d is home to %d of %d buyers; want about %d", s, c, n, n/k)
		}
	}
}
