package consume_test

import (
	"strconv"
	"testing"

	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/store"
)

func init() { asynctest.UseStore(store.Open) }

// env is one test's world (asynctest.Env) with the consumer tests'
// helpers; newEnv sets one up on the shared servers.
type env struct{ *asynctest.Env }

func newEnv(t testing.TB) *env { return &env{asynctest.New(t)} }

// itoa formats an id.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
