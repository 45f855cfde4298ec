package lab_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/lab"
)

// parentEnv makes the test binary the lab process of
// TestServersDieWithTheLab.
const parentEnv = "LAB_TEST_PARENT_DIR"

// TestHelperParent starts a stand-in server the way the lab does, prints
// its pid and waits to be killed. Run directly, it has nothing to do.
func TestHelperParent(t *testing.T) {
	dir := os.Getenv(parentEnv)
	if dir == "" {
		t.Skip("a helper process of TestServersDieWithTheLab")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"ready"}`)
	}))
	cmd := exec.Command("sh", "-c", `echo "flashsale: serving `+srv.URL+` (strategy naive)"; exec sleep 120`)
	if _, err := lab.StartProcess(context.Background(), cmd, filepath.Join(dir, "serve.log"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("child %d\n", cmd.Process.Pid)
	time.Sleep(2 * time.Minute) // until the test kills this process
}

// TestServersDieWithTheLab kills a lab process with SIGKILL: the server it
// started must not outlive it.
func TestServersDieWithTheLab(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^TestHelperParent$", "-test.count=1")
	parent.Env = append(os.Environ(), parentEnv+"="+t.TempDir())
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parent.Process.Kill(); _ = parent.Wait() }()
	child := 0
	sc := bufio.NewScanner(out)
	for child == 0 && sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "child "); ok {
			child, _ = strconv.Atoi(rest)
		}
	}
	if child == 0 {
		t.Fatalf("the helper printed no child pid: %v", sc.Err())
	}
	defer syscall.Kill(child, syscall.SIGKILL) //nolint:errcheck // gone already, if the test passes

	// A Ctrl-C at the terminal reaches the lab's process group only: the
	// lab stops its servers itself, gracefully.
	childGroup, err := syscall.Getpgid(child)
	if err != nil {
		t.Fatal(err)
	}
	labGroup, err := syscall.Getpgid(parent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if childGroup == labGroup {
		t.Errorf("server %d runs in its lab's process group %d", child, labGroup)
	}

	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("server %d still runs 10s after its lab was killed", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs: it exists and is not a zombie waiting
// for a reaper.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
