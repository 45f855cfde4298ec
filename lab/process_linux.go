package lab

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel send the server SIGTERM (a graceful stop)
// if the lab dies first, killed or crashed, so no server outlives it.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
