package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestMain runs the tests, then removes the flashsale binary they shared
// and stops the shared cluster.
func TestMain(m *testing.M) {
	code := testenv.RunMain(m)
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// built is the flashsale binary of this test binary, built once on first
// use (a go build under a loaded machine takes seconds to tens of seconds,
// and some fifty tests start it).
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// buildFlashsale returns the path of this command built (go build, once
// per test binary): the test binary cannot stand in for it as a child
// server. Tests must not change or remove the file.
func buildFlashsale(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "flashsale-test-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.dir, built.bin = dir, filepath.Join(dir, "flashsale")
		if out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}
