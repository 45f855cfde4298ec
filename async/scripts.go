package async

import (
	_ "embed" // the Lua scripts

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/luascript"
)

// The gate's own Lua scripts; those the consumer or the reconciler run too
// are in internal/layout. Each says in its header what it does, its KEYS
// and ARGV and what it returns; all KEYS of one call share one hash tag.
var (
	//go:embed gate.lua
	gateLua string
	//go:embed load.lua
	loadLua string
	//go:embed lookup.lua
	lookupLua string
	//go:embed epoch.lua
	epochLua string

	gateScript   = rueidis.NewLuaScript(gateLua)
	loadScript   = rueidis.NewLuaScript(layout.EntryLua + loadLua)
	lookupScript = rueidis.NewLuaScriptReadOnly(lookupLua)
	epochScript  = luascript.New(epochLua)
)
