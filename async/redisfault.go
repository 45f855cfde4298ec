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
// maxmemory under the noeviction policy.
//
// What such a refusal leaves behind was verified on Redis 7.0: a script
// (EVAL/EVALSHA without a shebang) is refused only at its first write
// command that may grow memory, and only if Redis was over maxmemory when
// the script started; once a script has written anything it runs to the
// end, over the limit if need be, because Redis cannot stop it half-way.
// Every script of this package is therefore whole or not at all under
// maxmemory: gate.lua's first write is the HINCRBY of the stock, so a
// refused batch of orders takes no unit, records no buyer and appends no
// entry (and one that got past it is written whole, a batch's worth over
// the limit at most). The
// scripts keep no shebang on purpose: a shebang script is refused as a
// whole while Redis is full even when it would write nothing, so a sold-out
// voucher would answer "unavailable" instead of "sold out", and ack.lua,
// which only frees memory (XACK, XTRIM), would be refused too, so a full
// Redis could never drain.
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
