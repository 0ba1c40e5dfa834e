package chengine

import "syscall"

// sysProcAttr makes the kernel SIGKILL the child when its parent dies, so a
// crashed or killed test binary does not leave an engine holding ports.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
