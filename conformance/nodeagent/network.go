package nodeagent

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// network is the node's pod network: a bridge on the host holding the
// node's address, and one network namespace per pod joined to it by a veth
// pair. Every pod has its own namespace because the echo server binds the
// wildcard address: replicas cannot share one.
type network struct {
	// prefix starts the name of every namespace and link, so that a run
	// never touches another's and leftovers can be found by name.
	prefix string
	bridge string
	nodeIP netip.Prefix
}

func newNetwork(prefix string, nodeIP netip.Prefix) *network {
	return &network{prefix: prefix, bridge: prefix + "br", nodeIP: nodeIP}
}

// ip runs the ip command and returns its error with what it printed.
func ip(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

func (n *network) up() error {
	if err := ip("link", "add", n.bridge, "type", "bridge"); err != nil {
		return fmt.Errorf("create pod network: %w", err)
	}
	for _, args := range [][]string{
		{"addr", "add", n.nodeIP.String(), "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	} {
		if err := ip(args...); err != nil {
			return fmt.Errorf("create pod network: %w", err)
		}
	}
	return nil
}

// down deletes the bridge; the pods' namespaces are gone by then.
func (n *network) down() error {
	if err := ip("link", "del", n.bridge); err != nil {
		return fmt.Errorf("delete pod network: %w", err)
	}
	return nil
}

// namespace names the network namespace of the pod with address number i.
func (n *network) namespace(i int) string { return fmt.Sprintf("%s-%d", n.prefix, i) }

// veth names the host side of that pod's veth pair.
func (n *network) veth(i int) string { return fmt.Sprintf("%sv%d", n.prefix, i) }

// addPod creates the namespace of address number i with the address addr:
// eth0 in the namespace, its peer on the bridge, a default route through
// the node.
func (n *network) addPod(i int, addr netip.Addr) error {
	ns, veth := n.namespace(i), n.veth(i)
	if err := ip("netns", "add", ns); err != nil {
		return fmt.Errorf("create pod namespace: %w", err)
	}
	for _, args := range [][]string{
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "address", podMAC(addr), "netns", ns},
		{"link", "set", veth, "master", n.bridge, "up"},
		{"-n", ns, "addr", "add", netip.PrefixFrom(addr, n.nodeIP.Bits()).String(), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "route", "add", "default", "via", n.nodeIP.Addr().String()},
	} {
		if err := ip(args...); err != nil {
			return fmt.Errorf("create pod namespace: %w", errors.Join(err, n.removePod(i)))
		}
	}
	return nil
}

// podMAC is the hardware address of the pod with address addr: the same
// for every pod that gets the address. With a random one, the node's
// neighbour entry for an address freed by one pod and given to the next
// still named the old pod's interface, and connections to the new pod
// timed out until the entry went stale (seen in TCPRouteReferenceGrant,
// whose backend got the address of one a test before had deleted).
func podMAC(addr netip.Addr) string {
	b := addr.As16()
	// Locally administered, unicast; the last four bytes are the IPv4
	// address or the low bytes of an IPv6 one.
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", b[12], b[13], b[14], b[15])
}

// removePod deletes the veth pair and the namespace of address number i,
// those that exist. The pair is deleted first: it would go with the
// namespace, but only once the kernel has freed that, later, and the next
// pod with this number needs the name.
func (n *network) removePod(i int) error {
	if exists("link", "show", n.veth(i)) {
		if err := ip("link", "del", n.veth(i)); err != nil {
			return fmt.Errorf("delete pod namespace: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join("/run/netns", n.namespace(i))); err == nil {
		if err := ip("netns", "del", n.namespace(i)); err != nil {
			return fmt.Errorf("delete pod namespace: %w", err)
		}
	}
	return nil
}

// exists runs an ip command that only looks and says whether it succeeded.
func exists(args ...string) bool { return exec.Command("ip", args...).Run() == nil }
