//go:build !linux

package testenv

import "syscall"

// childProcAttr: outside Linux there is no parent-death signal; servers
// are still killed by the tests' cleanups and by RunMain.
func childProcAttr() *syscall.SysProcAttr { return nil }
