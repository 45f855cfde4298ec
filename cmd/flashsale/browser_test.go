package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// chromium runs headless Chromium on url with args (--dump-dom,
// --screenshot=…) and returns its standard output. The browser and every
// process it starts run in their own process group, which is killed when
// chromium returns, so none outlives the test. A missing chromium fails the
// test.
func chromium(t *testing.T, url string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is needed for this test (apt-get install -y chromium): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + filepath.Join(t.TempDir(), "profile"), "--virtual-time-budget=6000"}, append(args, url)...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stderr = os.Stderr
	if !testing.Verbose() {
		cmd.Stderr = nil
	}
	out, err := cmd.Output()
	if cmd.Process != nil {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // helpers left behind
		deadline := time.Now().Add(5 * time.Second)
		for syscall.Kill(-pgid, 0) == nil { // killed processes linger until reaped by init
			if time.Now().After(deadline) {
				t.Errorf("chromium's process group %d is still alive", pgid)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return out
}
