// Package secretfile reads secrets (the JWT secret, the admin token, the
// payment webhook's secret) from files, so they stay off command lines,
// which ps and /debug/pprof/cmdline show, and says when such a file is
// readable by others than its owner.
package secretfile

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
)

// Read returns the file's content without its surrounding white space
// (trimRight: without its trailing white space only), naming flag in
// its errors; an empty file is an error.
func Read(flag, path string, trimRight bool) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	s := strings.TrimSpace(string(b))
	if trimRight {
		s = strings.TrimRight(string(b), " \t\r\n")
	}
	if s == "" {
		return "", fmt.Errorf("%s %s is empty", flag, path)
	}
	return s, nil
}

// Exposed reports whether others than the file's owner (its group, or
// anyone) may read or write it, and its permission bits.
func Exposed(path string) (bool, fs.FileMode, error) {
	st, err := os.Stat(path)
	if err != nil {
		return false, 0, err
	}
	return st.Mode().Perm()&0o077 != 0, st.Mode().Perm(), nil
}

// Warn logs a warning for each file of files (flag name → path; empty
// paths are skipped) that others than its owner may read.
func Warn(log *slog.Logger, files map[string]string) {
	for flag, path := range files {
		if path == "" {
			continue
		}
		if exposed, mode, err := Exposed(path); err == nil && exposed {
			log.Warn("a secret file is readable by others than its owner: make it with umask 077, or chmod 600 it",
				"flag", flag, "path", path, "mode", mode.String())
		}
	}
}
