package chengine

import "syscall"

// sysProcAttr is nil on purpose: no Pdeathsig. The kernel sends Pdeathsig
// when the OS thread that started the child exits, and the Go runtime does
// end threads while the process lives (go.dev/issue/27505): a shared test
// server was seen dying in the middle of a test binary that way. The
// child's stdin-pipe watch ends it when, and only when, the parent process
// is gone.
func sysProcAttr() *syscall.SysProcAttr { return nil }
