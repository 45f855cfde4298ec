package lab

import (
	"os/exec"
	"syscall"
)

// supervise ties a server to the lab. It runs in a process group of its
// own, so a Ctrl-C at the terminal reaches the lab alone, which then stops
// each server gracefully (one SIGTERM: the server drains; a second signal
// would end it at once). And the kernel sends it SIGTERM if the lab dies
// first, killed or crashed, so no server outlives it.
func supervise(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
