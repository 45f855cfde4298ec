// Package lock is a distributed lock on Redis: a fair, reentrant mutex with
// owner tokens, fencing tokens, leases kept alive by a watchdog, and waiters
// that are handed the lock directly instead of polling for it.
//
//	locks := lock.New(rueidisClient)               // one per process
//	l, err := locks.Mutex("order:42").Lock(ctx)    // waits; TryLock does not
//	if err != nil { ... }
//	defer l.Unlock(context.Background())
//	work(l.Context(), l.Fence())                   // l.Context ends if the lock is lost
//
// It depends only on the standard library and github.com/redis/rueidis, and
// works on a single Redis, Sentinel or Redis Cluster.
//
// # Guarantees
//
// Each acquisition gets a random owner token; only its holder can release,
// extend or re-enter the lock, atomically in Lua, and a holder whose lease
// ran out gets ErrNotHeld instead of deleting its successor's lock.
//
// Each acquisition also gets a fencing token (Lock.Fence) that strictly
// increases per lock name. No lease-based lock can stop a holder that was
// paused past its lease (GC, swap, a slow call) from acting as if it still
// held the lock; a resource that checks fencing tokens can, by refusing
// tokens lower than the highest it has seen (see Lock.Fence for the SQL).
//
// By default a watchdog renews the lease (10s) every lease/3 while the lock
// is held; if a renewal finds the lock gone, or cannot reach Redis before
// the lease runs out, Lost is closed and Context is cancelled with ErrLost.
// WithLease gives a fixed lease instead. A holder that dies frees the lock
// when its lease ends.
//
// Locks are reentrant through the handle (Lock.Reenter) or through a
// context that carries it (Lock.Context): Mutex.Lock with such a context
// adds a hold and returns the same handle. The hold count lives in Redis;
// the last Unlock releases.
//
// Redis replication is asynchronous: a failover to a replica that had not
// yet received a lock loses it. Fencing tokens are the protection that
// survives that too.
//
// # Waiting and handoff
//
// Waiters never poll. A release hands the lock over inside the release
// script: the next waiter is made the owner, with its own fencing token and
// lease, before it even wakes. Waiters in other processes are told with one
// PUBLISH on their Client's channel; each Client has one subscription, on a
// dedicated connection, however many goroutines wait. When it drops, the
// Client resubscribes and every waiter checks the lock at once; each also
// checks after a jittered fallback delay (100–300ms, WithFallback), so a
// lost push costs little.
//
// Queueing is two-level. In Redis, each Client has at most one waiter per
// lock queued, in arrival order. Within a Client, goroutines wait in line.
// When a goroutine holding the lock has local waiters behind it, its
// release passes the lock straight to the next of them, and the release's
// reply carries the grant: no push, no other process woken. A Client's turn
// covers the goroutines that were waiting when it began; then its next
// waiter joins the Redis queue behind the other Clients', in that same
// release script. So every goroutine gets one turn per round and nobody
// starves, one handoff costs one script, and a goroutine that asks again
// after its turn costs no Redis call at all.
//
// A grant pushed to a waiter that has not woken yet carries a short lease
// (2s, WithHandoffLease), extended at the new holder's first renewal: a
// waiter whose process died costs the others at most that, once per lock.
//
// # Keys
//
// Lock N uses three keys: <prefix>{N} (hash: owner token → hold count, and
// the holder's fence), <prefix>{N}:q (the queue) and <prefix>{N}:f (the last
// fence issued). All share the hash tag {N} and every key a script touches
// is passed in KEYS, so each script runs on the one Redis Cluster node that
// owns N. Idle locks leave only the fence key, which expires after the fence
// retention (24h, WithFenceRetention). Grants are published with PUBLISH on
// <prefix>ch:<client id>.
package lock
