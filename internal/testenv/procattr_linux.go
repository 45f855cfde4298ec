package testenv

import "syscall"

// childProcAttr makes the kernel SIGKILL a server when the thread that
// started it dies: a test binary that crashes or is killed leaves no
// redis-server behind. (Go threads outlive the test unless a goroutine
// ends while locked to its thread, which the tests here do not do.)
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
