//go:build !linux

package kubetest

import (
	"os/exec"
	"syscall"
)

// sysProcAttr has nothing to add where there is no Pdeathsig: processes
// of a test binary that dies without cleanup are left running there.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func startCommand(cmd *exec.Cmd) error { return cmd.Start() }
