package secretfile_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/secretfile"
)

func TestReadAndWarn(t *testing.T) {
	dir := t.TempDir()
	private, shared := filepath.Join(dir, "private"), filepath.Join(dir, "shared")
	if err := os.WriteFile(private, []byte("  s3cret \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shared, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := secretfile.Read("--x-file", private, false); err != nil || s != "s3cret" {
		t.Fatalf("Read = %q, %v", s, err)
	}
	if s, err := secretfile.Read("--x-file", private, true); err != nil || s != "  s3cret" {
		t.Fatalf("Read(trimRight) = %q, %v", s, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secretfile.Read("--x-file", empty, false); err == nil || !strings.Contains(err.Error(), "--x-file "+empty+" is empty") {
		t.Fatalf("Read(empty) = %v", err)
	}
	var logs bytes.Buffer
	secretfile.Warn(slog.New(slog.NewTextHandler(&logs, nil)), map[string]string{"--a-file": private, "--b-file": shared, "--c-file": ""})
	if out := logs.String(); !strings.Contains(out, "--b-file") || strings.Contains(out, "--a-file") || !strings.Contains(out, "-rw-r--r--") {
		t.Fatalf("warnings:\n%s", out)
	}
}
