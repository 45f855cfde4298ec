package async

import (
	"errors"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
)

// oomRetryAfter is the retry hint of an order refused because Redis is
// full: memory frees as the consumers persist and trim the streams, which
// takes about a batch.
const oomRetryAfter = time.Second

// IsOOM reports whether err is Redis refusing a write because it reached
// maxmemory under the noeviction policy. The pipeline's scripts then ran
// whole or not at all, so a refused order took nothing (DESIGN.md, "A
// full Redis").
func IsOOM(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ")
}

// redisUnavailable returns the caller-facing error of a Redis failure:
// EUnavailable, with a retry hint and its own message when Redis is full.
func redisUnavailable(err error) *flashsale.Error {
	if IsOOM(err) {
		return &flashsale.Error{Code: flashsale.EUnavailable, Message: "the order service is out of memory, try again shortly", RetryAfter: oomRetryAfter}
	}
	return flashsale.Errorf(flashsale.EUnavailable, "the order service is unavailable, try again")
}
