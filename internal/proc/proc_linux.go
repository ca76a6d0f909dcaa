package proc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Start starts cmd with Pdeathsig set, from one OS thread that never exits.
// Pdeathsig fires when the thread that forked the child exits, not the
// process, and Go ends threads whose goroutine exits while locked to them
// (the usual way code that enters a network namespace discards its
// thread): a fork from an arbitrary thread could kill a server mid-run.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	req := request{cmd: cmd, done: make(chan error)}
	starter() <- req
	return <-req.done
}

type request struct {
	cmd  *exec.Cmd
	done chan error
}

var starter = sync.OnceValue(func() chan<- request {
	requests := make(chan request)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for req := range requests {
			req.done <- req.cmd.Start()
		}
	}()
	return requests
})
