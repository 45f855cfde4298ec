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
// # Turns
//
// A Client (one per process) holds a lock in Redis for a turn: Redis grants
// the lock to one of its waiters, under that waiter's owner token, and for
// as long as the turn lasts the lock passes from goroutine to goroutine of
// the Client in the order they called Lock, without a Redis call. A turn
// covers the goroutines that were waiting in the Client when it began, and
// lasts at most WithTurnDuration (2ms); then the next release goes through
// Redis, which hands the lock to the next Client in its queue and queues
// this Client again if it still has waiters. So under contention most
// handoffs cost a goroutine wake-up instead of a round trip and a script,
// while every goroutine of every Client still gets one acquisition per
// round.
//
// # Guarantees
//
// Each acquisition has a random owner token (Lock.Token). Redis knows the
// token of the turn's first acquisition: the lock's hash holds it with the
// hold count and the lease. Release, Extend and Reenter by a handle are
// checked in the Client against the turn the handle belongs to (is the
// handle still the turn's holder, is the turn still alive?), and whenever
// Redis is involved, the turn's token is checked atomically in Lua. A
// handle that was released or handed on, or whose lease ran out, gets
// ErrNotHeld and changes nobody else's hold.
//
// A holder hands the lock on within its turn only while the turn's lease is
// known to be valid: Redis set it no earlier than a moment this process
// measured (when it sent the script that granted or renewed the turn, or,
// for a grant pushed by another Client, when it sent the script that queued
// the waiter), and at least a third of it must be left. Otherwise the
// holder first confirms and extends the turn in Redis (one script, which
// finds out if it was lost). A holder whose turn was lost sees Lost closed
// and Context cancelled, gets ErrNotHeld from Unlock, and never hands the
// lock on: its Client's next waiter has to get the lock from Redis. The
// same rule applies to every grant Lock and TryLock learn of from Redis,
// by a push or by a script's reply: if it comes so late (a long wait, a
// delayed push or reply) that less than a third of its lease is known to
// be left, it is confirmed in Redis, with its fencing token, and given the
// lock's own lease before Lock returns; if it ran out meanwhile, Lock
// queues again (TryLock returns ErrNotObtained).
//
// Each acquisition also gets a fencing token (Lock.Fence) that strictly
// increases per lock name, in the order the lock is held, across local
// handoffs, turns and Clients. Redis issues them in blocks, like batched ID
// ranges: the script that begins a turn reserves a block as large as the
// turn's waiters, and each local handoff takes the next token of the block
// (a turn that needs more reserves another block when it confirms its
// lease). No lease-based lock can stop a holder that was paused past its
// lease (GC, swap, a slow call) from acting as if it still held the lock; a
// resource that checks fencing tokens can, by refusing tokens lower than
// the highest it has seen (see Lock.Fence for the SQL).
//
// By default a watchdog renews the turn's lease (10s) every lease/3 while
// any goroutine of the turn holds the lock; if a renewal finds the lock
// gone, or cannot reach Redis before the lease runs out, the holder's Lost
// is closed and its Context is cancelled with ErrLost. WithLease gives a
// fixed lease instead; such acquisitions are always granted by Redis, each
// with its lease. A holder that dies frees the lock when its lease ends.
//
// Locks are reentrant through the handle (Lock.Reenter) or through a
// context that carries it (Lock.Context): Mutex.Lock with such a context
// adds a hold and returns the same handle. The hold count lives in Redis,
// under the turn's token; the last Unlock releases, and only then is the
// lock handed on.
//
// Redis replication is asynchronous: a failover to a replica that had not
// yet received a lock loses it. Fencing tokens are the protection that
// survives that too.
//
// # Waiting and handoff
//
// Waiters never poll. A release through Redis hands the lock over inside
// the release script: the next waiter is made the owner, with its own
// block of fencing tokens and lease, before it even wakes. Waiters in other
// processes are told with one PUBLISH on their Client's channel; each
// Client has one subscription, on a dedicated connection, however many
// goroutines wait. When it drops, the Client resubscribes and every waiter
// checks the lock at once; each also checks after a jittered fallback
// delay (100–300ms, WithFallback), so a lost push costs little.
//
// Queueing is two-level. In Redis, each Client has at most one waiter per
// lock queued, in arrival order. Within a Client, goroutines wait in line;
// within a turn they are handed the lock in line. When a turn is over, the
// release that ends it names the Client's next waiter, which joins the
// Redis queue behind the other Clients' in that same script (or takes the
// lock at once if nobody else waits). So every goroutine gets one turn per
// round and nobody starves, and a goroutine that asks again after its turn
// costs no Redis call at all.
//
// A grant pushed to a waiter that has not woken yet carries a short lease
// (2s, WithHandoffLease), extended at the new holder's first renewal: a
// waiter whose process died costs the others at most that, once per lock.
//
// # Keys
//
// Lock N uses three keys: <prefix>{N} (hash: the turn's token → hold
// count, and the first fence of the turn's block), <prefix>{N}:q (the
// queue) and <prefix>{N}:f (the last fence issued). All share the hash tag
// {N} and every key a script touches is passed in KEYS, so each script runs
// on the one Redis Cluster node that owns N. Idle locks leave only the
// fence key, which expires after the fence retention (24h,
// WithFenceRetention). Grants are published with PUBLISH on
// <prefix>ch:<client id>.
package lock
