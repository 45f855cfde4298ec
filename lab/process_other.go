//go:build !linux

package lab

import "os/exec"

// supervise does nothing here: only Linux can tie a child's life to its
// parent's. Servers a killed lab leaves behind must be stopped by hand.
func supervise(*exec.Cmd) {}
