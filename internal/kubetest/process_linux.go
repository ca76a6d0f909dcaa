package kubetest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// sysProcAttr makes the kernel kill a control plane process when the test
// binary dies without running its cleanup (a test timeout, a crash), so no
// API server outlives its test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// startCommand starts cmd from one OS thread that never exits. Pdeathsig
// fires when the thread that forked the child exits, not the process; Go
// ends threads whose goroutine exits while locked to them (the usual way
// code that enters a network namespace discards its thread), so a fork from
// an arbitrary thread could kill the API server in the middle of a test.
func startCommand(cmd *exec.Cmd) error {
	req := startRequest{cmd: cmd, done: make(chan error)}
	starter() <- req
	return <-req.done
}

type startRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var starter = sync.OnceValue(func() chan<- startRequest {
	requests := make(chan startRequest)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread lives as long as the test binary
		for req := range requests {
			req.done <- req.cmd.Start()
		}
	}()
	return requests
})
