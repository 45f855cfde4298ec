package async

import (
	_ "embed" // the Lua scripts

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

	gateScript     = rueidis.NewLuaScript(gateLua)
	loadScript     = rueidis.NewLuaScript(loadLua)
	snapshotScript = rueidis.NewLuaScriptReadOnly(snapshotLua)
	lookupScript   = rueidis.NewLuaScriptReadOnly(lookupLua)
	ackScript      = rueidis.NewLuaScript(ackLua)
	claimScript    = rueidis.NewLuaScript(claimLua)
	deadScript     = rueidis.NewLuaScript(deadLua)
	reapScript     = rueidis.NewLuaScript(reapLua)
	// backlog.lua reads TIME, which miniredis (the embedded Redis) refuses
	// in read-only scripts although Redis allows it.
	backlogScript = rueidis.NewLuaScript(backlogLua)
	unackedScript = rueidis.NewLuaScriptReadOnly(unackedLua)
	requeueScript = rueidis.NewLuaScript(requeueLua)
	restoreScript = rueidis.NewLuaScript(restoreLua)
	repointScript = rueidis.NewLuaScript(repointLua)
)
