package async_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

func init() { asynctest.UseStore(store.Open) }

// TestMain runs the tests, then stops the shared cluster.
func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// env is one test's world (asynctest.Env) with the gate tests' helpers.
type env struct{ *asynctest.Env }

// newEnv sets up an env on the shared servers; newEnvOn on the given Redis
// prefix and MySQL database.
func newEnv(t testing.TB) *env { return &env{asynctest.New(t)} }
func newEnvOn(t testing.TB, client rueidis.Client, prefix, dsn, url string) *env {
	return &env{asynctest.NewOn(t, client, prefix, dsn, url)}
}

// itoa formats an id.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
