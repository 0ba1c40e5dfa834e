//go:build !linux

package chengine

import "syscall"

// sysProcAttr: without Pdeathsig the stdin-pipe watch alone ends orphans.
func sysProcAttr() *syscall.SysProcAttr { return nil }
