package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProgressOfARealRun runs go test -json on a module made up here, one
// package passing, one failing (a failed subtest and a passing test), one
// that does not build and one without tests, and checks what is printed:
// a start and an end line per package, the failed tests' output in full,
// nothing of the passing tests, and the summary.
func TestProgressOfARealRun(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "go.mod", "module example.com/m\n\ngo 1.22\n")
	write(t, dir, "good/good_test.go", "package good\nimport \"testing\"\nfunc TestGood(t *testing.T) { t.Log(\"quiet\") }\n")
	write(t, dir, "bad/bad_test.go", `package bad
import "testing"
func TestFine(t *testing.T) { t.Log("fine output") }
func TestBroken(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Error("the broken value") })
}
`)
	write(t, dir, "nobuild/nobuild_test.go", "package nobuild\nimport \"testing\"\nfunc TestX(t *testing.T) { undefined() }\n")
	write(t, dir, "notests/notests.go", "package notests\n")
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	raw, err := cmd.Output()
	if err == nil {
		t.Fatal("go test passed; want it to fail")
	}
	var out bytes.Buffer
	p := newProgress(&out, time.Now)
	p.read(bytes.NewReader(raw))
	p.summary()
	got := out.String()
	t.Logf("printed:\n%s", got)
	for _, want := range []string{
		"start example.com/m/good\n",
		"ok    example.com/m/good  ",
		"start example.com/m/bad\n",
		"FAIL  example.com/m/bad  ",
		"--- output of TestBroken/sub (example.com/m/bad)\n",
		"the broken value",
		"FAIL  example.com/m/nobuild",
		"undefined: undefined",
		"?     example.com/m/notests",
		"4 packages in ",
		", 2 failed; slowest: ",
		"slowest tests: example.com/m/",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	progress, _, _ := strings.Cut(got, "4 packages in ") // the summary names every test
	for _, unwanted := range []string{"quiet", "fine output", "TestFine"} {
		if strings.Contains(progress, unwanted) {
			t.Errorf("printed %q, of a test that passed", unwanted)
		}
	}
}

// TestHeartbeatNamesTheRunningPackages: a package that started and has
// not ended is named with how long it has run.
func TestHeartbeatNamesTheRunningPackages(t *testing.T) {
	clock := time.Unix(0, 0)
	var out bytes.Buffer
	p := newProgress(&out, func() time.Time { return clock })
	p.handle(event{Action: "start", Package: "a"})
	p.handle(event{Action: "start", Package: "b"})
	p.handle(event{Action: "pass", Package: "b", Elapsed: 1})
	clock = clock.Add(90 * time.Second)
	p.heartbeat()
	if want := "running after 1m30s: a (1m30s)\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("printed:\n%s\nwant it to end with %q", out.String(), want)
	}
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
