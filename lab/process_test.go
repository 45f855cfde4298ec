package lab_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/lab"
)

// TestStartProcess starts a stand-in for flashsale serve that prints the
// serving line of a ready server, then stops it with SIGTERM.
func TestStartProcess(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"ready"}`)
	}))
	defer srv.Close()
	cmd := exec.Command("sh", "-c", `echo "starting" >&2; echo "flashsale: serving `+srv.URL+` (strategy naive)"; exec sleep 60`)
	p, err := lab.StartProcess(context.Background(), cmd, filepath.Join(t.TempDir(), "serve.log"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.URL != srv.URL {
		t.Errorf("URL %q, want %q", p.URL, srv.URL)
	}
	start := time.Now()
	err = p.Stop(30 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "terminated") || time.Since(start) > 20*time.Second {
		t.Errorf("Stop = %v after %s; want the exit by SIGTERM, not a kill", err, time.Since(start))
	}
}

// TestStartProcessShowsTheLogOfAFailedStart checks that a server that
// exits before serving is reported with the end of its log.
func TestStartProcessShowsTheLogOfAFailedStart(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo "flashsale: --db: database does not exist" >&2; exit 1`)
	_, err := lab.StartProcess(context.Background(), cmd, filepath.Join(t.TempDir(), "serve.log"), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before serving") || !strings.Contains(err.Error(), "database does not exist") {
		t.Errorf("StartProcess = %v; want the exit and the log's last lines", err)
	}
}
