//go:build !linux

package proc

import "os/exec"

// Start starts cmd. Without Pdeathsig, processes of a parent that dies
// without cleanup are left running here.
func Start(cmd *exec.Cmd) error { return cmd.Start() }
