package proxy

import (
	"time"

	"golang.org/x/sys/unix"
)

// socketQuiet is how long the TCP socket fd has neither received nor sent
// data, by the kernel's own count (TCP_INFO's last_data_recv and
// last_data_sent): a relayed connection's bytes pass by splice or on a
// relay loop, where no Go code sees them.
func socketQuiet(fd uintptr) (time.Duration, bool) {
	info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, false
	}
	return time.Duration(min(info.Last_data_recv, info.Last_data_sent)) * time.Millisecond, true
}
