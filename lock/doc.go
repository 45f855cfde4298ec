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
// It depends only on the standard library and github.com/redis/rueidis. All
// keys of one lock name share one hash tag and every script names the keys
// it touches, so each lock lives on the Redis Cluster master that owns its
// name's slot. It is tested on a single Redis, on several independent ones
// (MultiLock), on a Sentinel set through failovers (WithReplicas) and on a
// 3-master Redis Cluster (mutual exclusion and increasing fences across
// three processes, for Mutex, RWMutex and Semaphore; a MultiLock with one
// part on it; flashsale's lock strategy through a master SIGKILL and
// failover). Grants are pushed with PUBLISH, which a cluster forwards to
// every node, so a Client may subscribe on any node; each push costs one
// message on the cluster bus per node.
//
// # Guarantees
//
// While its lease lasts, a lock has one holder. Each acquisition has its own
// owner token (Lock.Token); Unlock, Extend and Reenter by a handle that was
// released, or whose lease ran out, return ErrNotHeld and change nobody
// else's hold. A holder that loses its lock (a renewal found it gone, or
// could not reach Redis before the lease ran out) is told: Lock.Lost is
// closed and Lock.Context is cancelled with cause ErrLost.
//
// No lease-based lock can stop a holder that was paused past its lease (GC,
// swap, a slow call) from acting as if it still held the lock, and Redis
// replication is asynchronous, so a failover can lose a lock. Fencing tokens
// (Lock.Fence) protect against both: they strictly increase per lock name
// in the order the lock is held, and a resource that refuses tokens lower
// than the highest it has seen refuses the stale holder.
//
// By default a watchdog renews the lease (10s) every lease/3 while the lock
// is held, so a holder that dies frees the lock at most a lease later;
// WithLease gives a fixed lease instead. A waiter that is handed the lock
// after its process died holds it up for at most WithHandoffLease (2s).
//
// Locks are reentrant through the handle (Lock.Reenter) or through a context
// that carries it (Lock.Context): each hold needs its own Unlock, and only
// the last one releases.
//
// # Contexts
//
// Lock, TryLock, Unlock, Extend and Reenter of every type return within
// 200ms of the end of their context, with ctx.Err(), even if Redis is dead
// or stopped: a script sent before the end is waited for 100ms more, then
// given up. What it may still do in Redis is undone by a cancel or a
// release, or expires (a grant with its lease, a queue entry with its
// queue), so another Client gets the lock at most a lease after Redis is
// back. The bound needs no option on the rueidis client. One window is
// wider: a call made within 10ms of the moment Redis stalls, while its
// connection must be dialled again, can wait for rueidis's dial timeout (5s
// by default) — calls are sent from the caller's goroutine while the
// client's connections answer, which is what keeps them cheap (see
// DESIGN.md, "Contexts and a silent Redis"). A context with neither
// deadline nor cancellation waits for Redis as long as it takes.
//
// # Failover
//
// Without WithReplicas, a failover can promote a replica that had not yet
// received an acquisition: the lock is then free on the new primary while
// its holder still believes it holds it, and the fencing tokens of that
// acquisition may be issued again. WithReplicas(n, timeout) makes Lock
// return only once n replicas acknowledged the acquisition (Redis WAIT),
// and counts a renewal only once they acknowledged it; otherwise Lock
// fails with ErrNotReplicated, leaving nothing held, and a holder whose
// renewals stay unacknowledged loses the lock when the acknowledged lease
// runs out.
//
// # Several masters
//
// NewMulti(clients...).Mutex(name) is one lock over several independent
// Redis masters: a MultiLock is held only while the lock is held on every
// one of them (not a majority: Redlock is not what it does). Lock takes
// them in the given order, waiting on each as Mutex.Lock does, and a
// failure on any releases the others; each part keeps its own lease and
// watchdog, and the MultiLock is lost (Lost, Context) as soon as any part
// is. Fences gives each master's fencing token, each of which increases in
// the order the MultiLock is held; Fence is the first master's.
//
// # Fairness
//
// Waiters are served in turns: Clients in the order they queued in Redis,
// and the goroutines of one Client in the order they called Lock. Within a
// Client's turn, which lasts at most WithTurnDuration (2ms), the lock passes
// between its goroutines without a Redis call. Every goroutine gets one
// acquisition per round, so nobody starves.
//
// # Keys
//
// Lock N uses the keys <prefix>{N} (hash), <prefix>{N}:q (wait queue) and
// <prefix>{N}:f (last fencing token), and publishes grants on
// <prefix>ch:<client id>; WithReplicas writes <prefix>{N}:w (10s) before
// each WAIT. Idle locks leave only the fence key, which expires
// at most the fence retention (24h, WithFenceRetention) after it was set.
//
// # RWMutex and Semaphore
//
// Client.RWMutex is a readers-writer lock (many readers or one writer) and
// Client.Semaphore a counting semaphore (at most n holders, n kept in Redis
// and changed by SetPermits). Each acquisition (RWLock, Permit) has its own
// owner token, lease and watchdog, Lost and Context, as a Mutex's Lock;
// write locks are fenced and re-entrant by handle. Waiters are served in
// the order they queued in Redis, so a reader never overtakes a waiting
// writer, and are woken by a push through the Client's subscriber, with
// the same fallback check. There are no turns: every acquisition is a
// Redis script. Their keys are <prefix>{N}:rw… and <prefix>{N}:sem…
// (DESIGN.md), apart from Mutex N's.
//
// How the lock works (turns, queues, handoffs, fencing-token blocks) is in
// DESIGN.md beside this file.
package lock
