package auth

import (
	"sync"
	"time"
)

// tokenCacheSize bounds the tokens a tokenCache remembers.
const tokenCacheSize = 1 << 16

// tokenCache remembers the user tokens User verified, so the repeated
// requests of one buyer (a flash sale's clicks) skip the base64, JSON and
// HMAC work. A hit is the very token, signature included, that passed
// verification before, looked up before it expires: it says nothing a new
// verification would not. When full, an arbitrary entry makes room.
type tokenCache struct {
	mu sync.RWMutex
	m  map[string]cachedToken
}

// cachedToken is a verified token's user and when the cache stops
// answering for it.
type cachedToken struct {
	user  int64
	until time.Time
}

// get returns the user of a token verified before, if it is still valid
// at now.
func (c *tokenCache) get(token string, now time.Time) (int64, bool) {
	c.mu.RLock()
	e, ok := c.m[token]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return 0, false
	}
	return e.user, true
}

// put remembers a verified token until the given time.
func (c *tokenCache) put(token string, user int64, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedToken)
	}
	if len(c.m) >= tokenCacheSize {
		for k := range c.m { // map order is random: evict one at random
			delete(c.m, k)
			break
		}
	}
	c.m[token] = cachedToken{user: user, until: until}
}
