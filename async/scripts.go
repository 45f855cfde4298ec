package async

import (
	_ "embed" // the Lua scripts

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/redis/rueidis"
)

// The Lua scripts. Each says in its header what it does, its KEYS and ARGV
// and what it returns; all KEYS of one call share one hash tag.
var (
	//go:embed gate.lua
	gateLua string
	//go:embed load.lua
	loadLua string
	//go:embed snapshot.lua
	snapshotLua string
	//go:embed lookup.lua
	lookupLua string
	//go:embed ack.lua
	ackLua string
	//go:embed claim.lua
	claimLua string
	//go:embed dead.lua
	deadLua string
	//go:embed reap.lua
	reapLua string
	//go:embed backlog.lua
	backlogLua string
	//go:embed unacked.lua
	unackedLua string
	//go:embed requeue.lua
	requeueLua string
	//go:embed restore.lua
	restoreLua string
	//go:embed repoint.lua
	repointLua string
	//go:embed epoch.lua
	epochLua string
	//go:embed retire.lua
	retireLua string

	gateScript     = rueidis.NewLuaScript(gateLua)
	loadScript     = rueidis.NewLuaScript(loadLua)
	snapshotScript = luascript.NewReadOnly(snapshotLua) // ExecMulti: one round trip
	lookupScript   = rueidis.NewLuaScriptReadOnly(lookupLua)
	ackScript      = rueidis.NewLuaScript(ackLua)
	claimScript    = rueidis.NewLuaScript(claimLua)
	deadScript     = rueidis.NewLuaScript(deadLua)
	reapScript     = rueidis.NewLuaScript(reapLua)
	// backlog.lua reads TIME, which miniredis (the embedded Redis) refuses
	// in read-only scripts although Redis allows it.
	backlogScript = luascript.New(backlogLua)
	unackedScript = rueidis.NewLuaScriptReadOnly(unackedLua)
	requeueScript = rueidis.NewLuaScript(requeueLua)
	restoreScript = rueidis.NewLuaScript(restoreLua)
	repointScript = rueidis.NewLuaScript(repointLua)
	epochScript   = luascript.New(epochLua)
	retireScript  = rueidis.NewLuaScript(retireLua)
)

// The fields of stream entries, as the Lua scripts write them (gate.lua
// and requeue.lua the orders stream, dead.lua the dead-letter stream).
// They are on the wire: renaming one would make old entries unreadable.
const (
	fieldOrder  = "o"      // order id
	fieldUser   = "u"      // user id
	fieldReason = "reason" // dead letters: why, for a person
	fieldKind   = "kind"   // dead letters: why, for a program (a DeadKind)
)

// DeadKind says, machine-readably, why an order was dead-lettered: the
// dead-letter stream's "kind" field. Entries written before the field
// existed have only the human-readable "reason".
type DeadKind string

// The kinds of dead letters.
const (
	// DeadStockShort: MySQL had no stock left for the order, so Redis sold
	// one unit too many; reconciliation does not give it back.
	DeadStockShort DeadKind = "stock_short"
	// DeadConflict: the user has another order for the voucher in MySQL.
	DeadConflict DeadKind = "conflict"
	// DeadMalformed: the stream entry is not an order.
	DeadMalformed DeadKind = "malformed"
	// DeadPoison: attempts to persist the order on its own kept dying.
	DeadPoison DeadKind = "poison"
)
