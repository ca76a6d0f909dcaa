package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/internal/proc"
)

// process is one running binary of the control plane, its output appended
// to a log file in the Env's directory (kept across restarts).
type process struct {
	name string
	cmd  *exec.Cmd
	// exited is closed once the process has been waited for and
	// cmd.ProcessState is set.
	exited chan struct{}
}

func startProcess(name, logPath, path string, args ...string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := proc.Start(cmd); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		log.Close()
		close(p.exited)
	}()
	return p, nil
}

// waitReady polls until ready reports true, the process exits or the
// timeout passes.
func (p *process) waitReady(timeout time.Duration, ready func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		ok := ready(attempt)
		cancelAttempt()
		if ok {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (%s)", p.name, p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v", p.name, timeout)
		case <-tick.C:
		}
	}
}

// terminate asks the process to shut down (SIGTERM) and kills it if it is
// still there after grace.
func (p *process) terminate(grace time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		return p.kill()
	}
}

// kill ends the process with SIGKILL and waits until it is gone, so that
// its port and files are free when kill returns.
func (p *process) kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	<-p.exited
	return nil
}

// httpReady returns a readiness check that wants status 200 from url.
func httpReady(client *http.Client, url, bearer string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// freeLoopbackPorts asks the kernel for n distinct free ports on 127.0.0.1.
// They are closed again before the processes bind them, a small race that a
// test run can live with.
func freeLoopbackPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		// Closed only after all are picked, so the ports are distinct.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logTail returns the last n lines of the file at path, or "" when it
// cannot be read.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for _, line := range lines {
		b.WriteString("\t")
		b.Write(line)
		b.WriteString("\n")
	}
	return b.String()
}
