//go:build !linux

package proxy

import "net"

// listenConfig leaves keep-alive to net's Accept, with the same probes.
func listenConfig() net.ListenConfig {
	return net.ListenConfig{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount}}
}
