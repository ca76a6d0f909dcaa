//go:build linux

// Package evloop holds what hostgate's readiness loops share at the
// level of the system: proxy/h1loop's, which serve HTTP/1.1, and
// proxy/l4/relay's, which carry TCP connections. Each worker of theirs
// waits on a Poller of its own; sockets are non-blocking, registered once
// and edge-triggered, and read and written with raw system calls, which
// never block and so need none of the runtime's bookkeeping; deadlines
// are on a timer wheel per worker (wheel.go). What a connection is and
// when it ends is each loop's own.
//
// It imports no other package of hostgate's.
package evloop

import (
	"net"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Poller is an epoll set and the eventfd, in it, that other goroutines
// wake its worker with.
type Poller struct {
	FD, Wake int
}

// NewPoller makes a Poller.
func NewPoller() (Poller, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return Poller{}, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ep)
		return Poller{}, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(ep)
		unix.Close(wake)
		return Poller{}, err
	}
	return Poller{FD: ep, Wake: wake}, nil
}

// WakeUp has the worker's wait return, from any goroutine.
func (p Poller) WakeUp() {
	one := [8]byte{1}
	_, _ = unix.Write(p.Wake, one[:])
}

// Woken takes the wake-ups, once the wait returned for them.
func (p Poller) Woken() {
	var b [8]byte
	_, _ = unix.Read(p.Wake, b[:])
}

func (p Poller) Close() {
	unix.Close(p.FD)
	unix.Close(p.Wake)
}

// Add registers fd, edge-triggered for reading, writing and the peer's
// half-close. Its events carry tag (Pad), which tells them from those of
// a socket closed earlier with the same number, left in a wait's batch.
func (p Poller) Add(fd int, tag int32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd), Pad: tag}
	return unix.EpollCtl(p.FD, unix.EPOLL_CTL_ADD, fd, &ev)
}

// WaitNow takes the events ready now, without blocking and without the
// runtime's bookkeeping around a system call that may block.
func (p Poller) WaitNow(evs []unix.EpollEvent) int {
	n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.FD), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if errno != 0 {
		return 0
	}
	return int(n)
}

// Wait waits up to msec milliseconds (-1: for ever) for events.
func (p Poller) Wait(evs []unix.EpollEvent, msec int) int {
	n, err := unix.EpollWait(p.FD, evs, msec)
	if err != nil {
		return 0 // EINTR
	}
	return n
}

// Read and Write are the raw non-blocking system calls, made again when a
// signal interrupted them (EINTR), which no caller has anything else to do
// about.
func Read(fd int, p []byte) (int, unix.Errno) {
	return rawIO(unix.SYS_READ, fd, p)
}

func Write(fd int, p []byte) (int, unix.Errno) {
	return rawIO(unix.SYS_WRITE, fd, p)
}

func rawIO(call uintptr, fd int, p []byte) (int, unix.Errno) {
	for {
		n, _, errno := unix.RawSyscall(call, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		if errno != unix.EINTR {
			return int(n), errno
		}
	}
}

// SendNow writes p to fd at once as far as the socket takes it, after
// what *out holds, and leaves the rest in *out: writable again is the
// next edge the loop waits for. It returns the write's failure.
func SendNow(fd int, p []byte, out *[]byte) unix.Errno {
	if len(*out) > 0 {
		*out = append(*out, p...)
		return 0
	}
	for len(p) > 0 {
		n, errno := Write(fd, p)
		switch {
		case errno == unix.EAGAIN:
			*out = append(*out, p...)
			return 0
		case errno != 0:
			return errno
		}
		p = p[n:]
	}
	return 0
}

// Connect starts a non-blocking connect to ap, with no Nagle delay and
// keep-alive probes at the system's timings (one option, where Go's
// dialer sets four), and registers the socket with p, with tag as Add.
// inProgress says the connect goes on: writable is the edge that says it
// succeeded.
func (p Poller) Connect(ap netip.AddrPort, tag int32) (fd int, inProgress bool, err error) {
	family := unix.AF_INET6
	var sa unix.Sockaddr
	if ip := ap.Addr().Unmap(); ip.Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16()}
	}
	fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, false, os.NewSyscallError("socket", err)
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	switch err = unix.Connect(fd, sa); err {
	case nil:
	case unix.EINPROGRESS:
		inProgress = true
	default:
		unix.Close(fd)
		return -1, false, os.NewSyscallError("connect", err)
	}
	if err := p.Add(fd, tag); err != nil {
		unix.Close(fd)
		return -1, false, os.NewSyscallError("epoll_ctl", err)
	}
	return fd, inProgress, nil
}

// ConnectError is why the connect under way on fd failed, once an edge
// said it did.
func ConnectError(fd int) error {
	errno, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return os.NewSyscallError("getsockopt", err)
	}
	if errno == 0 {
		// An error or a hang-up with none recorded: the peer reset the
		// connection as it was made.
		errno = int(unix.ECONNRESET)
	}
	return os.NewSyscallError("connect", unix.Errno(errno))
}

// GoConn makes fd, a connected socket a loop no longer watches, a
// connection of Go's netpoller, and closes fd: net.FileConn takes a copy
// of it, which the connection owns.
func GoConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	return net.FileConn(f)
}
