package watch

// Gateway addresses: which entries of spec.addresses hostgate satisfies,
// the addresses a Gateway's listeners bind, and what status.addresses and
// the AddressesAssigned condition say (GEP-5093).
//
// Each entry is a request of its own:
//   - a value, with the default routability or the conformance sentinel:
//     that address, bound on the node (GatewayStaticAddresses);
//   - no value: an address of the pool (--address-pool), one per entry;
//     without a pool the Gateway is served on every node address and each
//     such entry is reported with one of them;
//   - routability Cluster: a ClusterIP of the Service kept for the Gateway
//     (--gateway-services), which kube-proxy takes to the addresses its
//     EndpointSlices list: the Gateway's other addresses or, when it has
//     none, one assigned as for an entry without a value and not reported;
//   - any other routability: a scope hostgate does not provide.
//
// A node-local proxy cannot narrow where the addresses it binds are
// reachable from, so it offers no scope but the default and Cluster, and a
// Gateway asked only for Cluster is still served on the address behind
// its ClusterIP. An entry left unsatisfied is left out of status.addresses
// and named in AddressesAssigned; with none satisfied the Gateway is not
// programmed.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Routability values hostgate knows beyond the API's constants.
const (
	// routabilitySentinel is reserved for conformance tests: an
	// implementation claiming GatewayAddressRoutability serves it as the
	// default scope and reports it as requested.
	routabilitySentinel gatewayv1.GatewayAddressRoutabilityType = "testing.x-k8s.io/sentinel"
	// routabilityTesting is the prefix of the values reserved for
	// conformance; any but the sentinel must be refused.
	routabilityTesting = "testing.x-k8s.io/"
)

// addressRequest is one entry of a Gateway's spec.addresses.
type addressRequest struct {
	index       int
	routability gatewayv1.GatewayAddressRoutabilityType
	// value is the address asked for, "" for one to be assigned.
	value string
	// cluster is set for routability Cluster, pooled for an entry without
	// a value to be given an address of the pool or a node address.
	cluster, pooled bool
	// assigned is the address that satisfies the entry; unassigned says
	// why none does, naming the entry and its field.
	assigned   string
	unassigned string
}

// field names the entry's field f in messages.
func (r *addressRequest) field(f string) string {
	return fmt.Sprintf("spec.addresses[%d].%s", r.index, f)
}

// assignAddresses gives every Gateway the addresses its listeners bind
// and its status reports: spec.addresses entry by entry, or without
// entries one address of the pool, else the node addresses.
//
// A pool address must not move while the Gateway lives: clients were
// told it in the status. So a Gateway keeps the addresses its status shows
// while they are free, and otherwise takes the first free address from a
// place in the pool fixed by its namespace and name. The informer's copy
// of the status lags the status just written; a Gateway whose status has
// not caught up still lands on the address it was given, unless a
// Gateway whose place collides with its own came or went meanwhile.
// (Handing out the lowest free address moved it whenever any Gateway came
// or went in that window.)
func (t *translator) assignAddresses(gws []*gateway) {
	taken := map[string]bool{}
	want := make(map[*gateway]int, len(gws))
	for _, g := range gws {
		want[g] = t.requestAddresses(g, taken)
	}
	var short []*gateway
	for _, g := range gws {
		if want[g] > 0 && len(t.opts.AddressPool) == 0 {
			t.nodeAddressesFor(g)
			continue
		}
		// The pool addresses the status shows stay the Gateway's.
		for _, a := range g.obj.Status.Addresses {
			if want[g] > 0 && slices.Contains(t.opts.AddressPool, a.Value) && !taken[a.Value] {
				g.fromPool(a.Value)
				taken[a.Value] = true
				want[g]--
			}
		}
		if want[g] > 0 {
			short = append(short, g)
		}
	}
	pool := t.opts.AddressPool
	for _, g := range short {
		start := poolPlace(g.obj.Namespace, g.obj.Name, len(pool))
		for i := 0; i < len(pool) && want[g] > 0; i++ {
			if a := pool[(start+i)%len(pool)]; !taken[a] {
				g.fromPool(a)
				taken[a] = true
				want[g]--
			}
		}
		if want[g] > 0 {
			g.poolExhausted()
		}
	}
	for _, g := range gws {
		t.clusterAddresses(g)
		t.addressStatus(g)
	}
}

// requestAddresses evaluates the entries of g's spec.addresses that need
// nothing but themselves, binds the addresses they name, and returns how
// many addresses g needs assigned.
func (t *translator) requestAddresses(g *gateway, taken map[string]bool) int {
	if len(g.obj.Spec.Addresses) == 0 {
		return 1
	}
	assign, cluster := 0, false
	for i, a := range g.obj.Spec.Addresses {
		r := &addressRequest{index: i, routability: a.Routability, value: a.Value}
		g.requests = append(g.requests, r)
		if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
			r.unassigned = fmt.Sprintf("%s: %s is not supported, only IPAddress", r.field("type"), *a.Type)
			g.accepted.first(string(gatewayv1.GatewayReasonUnsupportedAddress), r.unassigned)
			continue
		}
		switch rt := a.Routability; {
		case rt == gatewayv1.GatewayAddressRoutabilityCluster:
			// Satisfied, or not, once g's other addresses are known.
			r.cluster, cluster = true, true
			continue
		case rt == gatewayv1.GatewayAddressRoutabilityDefault || rt == routabilitySentinel:
		case strings.HasPrefix(string(rt), routabilityTesting):
			r.unassigned = fmt.Sprintf("%s %q: reserved for conformance tests and not supported", r.field("routability"), rt)
			continue
		default:
			r.unassigned = fmt.Sprintf("%s %q: not a scope hostgate provides (it provides the default, Cluster with --gateway-services, and %s)",
				r.field("routability"), rt, routabilitySentinel)
			continue
		}
		// An address without a value asks for one to be assigned
		// (GatewayAddressEmpty).
		if a.Value == "" {
			r.pooled = true
			assign++
			continue
		}
		ip, err := netip.ParseAddr(a.Value)
		if err == nil && slices.Contains(g.addresses, ip.String()) {
			// Each entry needs an address of its own in status.
			r.unassigned = fmt.Sprintf("%s %q: an earlier entry has it already", r.field("value"), a.Value)
			continue
		}
		switch {
		case err != nil:
			err = errors.New("not an IP address")
		case t.opts.AddressUsable != nil:
			err = t.opts.AddressUsable(ip)
		}
		if err != nil {
			r.unassigned = fmt.Sprintf("%s %q: %v", r.field("value"), a.Value, err)
			g.unusable.first(string(gatewayv1.GatewayReasonAddressNotUsable), r.unassigned)
			continue
		}
		r.assigned = ip.String()
		g.addresses = append(g.addresses, r.assigned)
		taken[r.assigned] = true
	}
	// A ClusterIP leads to the Gateway's other addresses: one is
	// assigned when it has none, and left out of the status. Without
	// the Services there is no ClusterIP, and the address would only
	// take one of the pool from another Gateway.
	if assign == 0 && cluster && len(g.addresses) == 0 && t.opts.GatewayServices {
		return 1
	}
	return assign
}

// fromPool gives g the pool address a, for its first entry still without
// one, or as its address when its spec has none or asks only for Cluster.
func (g *gateway) fromPool(a string) {
	g.addresses = append(g.addresses, a)
	for _, r := range g.requests {
		if r.pooled && r.assigned == "" {
			r.assigned = a
			return
		}
	}
}

// poolExhausted marks the entries of g still without an address.
func (g *gateway) poolExhausted() {
	const exhausted = "the address pool is exhausted"
	missing := false
	for _, r := range g.requests {
		if r.pooled && r.assigned == "" {
			r.unassigned = r.field("value") + ": " + exhausted
			missing = true
		}
	}
	if !missing {
		// The address of a Gateway whose spec has none, or that only
		// backs its ClusterIP.
		g.programmed.first(string(gatewayv1.GatewayReasonAddressNotAssigned), exhausted)
	}
}

// nodeAddressesFor serves g on every node address, without a pool. A
// Gateway that names addresses of its own is served on those only, as
// a node address would take its port on every address of the node.
func (t *translator) nodeAddressesFor(g *gateway) {
	if len(g.addresses) > 0 {
		for _, r := range g.requests {
			if r.pooled {
				r.unassigned = r.field("value") + ": no address to assign: without --address-pool a Gateway is served on the node addresses only when it names no address of its own"
			}
		}
		return
	}
	g.addresses = []string{""}
	k := 0
	for _, r := range g.requests {
		if !r.pooled {
			continue
		}
		if k < len(t.nodeAddresses) {
			r.assigned = t.nodeAddresses[k]
			k++
			continue
		}
		r.unassigned = fmt.Sprintf("%s: no node address left to report for it (the node addresses are %q; --address-pool gives each entry an address of its own)",
			r.field("value"), t.nodeAddresses)
	}
}

// poolPlace is where in a pool of n addresses the Gateway namespace/name
// starts looking for a free one.
func poolPlace(namespace, name string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(namespace))
	h.Write([]byte{'/'})
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(n))
}

// servedOn are the addresses g is served on, the node addresses for "".
func (t *translator) servedOn(g *gateway) []string {
	if slices.Equal(g.addresses, []string{""}) {
		return t.nodeAddresses
	}
	return g.addresses
}

// clusterAddresses satisfies g's Cluster entries with the ClusterIPs of
// the Service kept for it, each ClusterIP once. A ClusterIP qualifies
// only if kube-proxy has somewhere to take it: an endpoint of its family
// in the EndpointSlices written for the Gateway.
func (t *translator) clusterAddresses(g *gateway) {
	var cluster []*addressRequest
	for _, r := range g.requests {
		if r.cluster {
			cluster = append(cluster, r)
		}
	}
	if len(cluster) == 0 {
		return
	}
	if !t.opts.GatewayServices {
		for _, r := range cluster {
			r.unassigned = r.field("routability") + " Cluster: needs --gateway-services, with which the address is the ClusterIP of the Service hostgate keeps for the Gateway"
		}
		return
	}
	name := types.NamespacedName{Namespace: g.obj.Namespace, Name: serviceName(g.obj.Name, string(g.obj.Spec.GatewayClassName))}
	ips, why := t.gatewayServiceIPs(name)
	endpoints := endpointAddresses(t.servedOn(g))
	used := map[string]bool{}
	for _, r := range cluster {
		if why != "" {
			r.unassigned = r.field("routability") + " Cluster: " + why
			continue
		}
		candidates := ips
		if r.value != "" {
			ip, err := netip.ParseAddr(r.value)
			if err != nil || !slices.Contains(ips, ip.Unmap()) {
				r.unassigned = fmt.Sprintf("%s %q: not a ClusterIP of the Service %s that hostgate keeps for the Gateway (%s), and hostgate does not choose a Service's ClusterIP",
					r.field("value"), r.value, name, joinAddrs(ips))
				continue
			}
			candidates = []netip.Addr{ip.Unmap()}
		}
		for _, ip := range candidates {
			if !used[ip.String()] && len(endpoints[addressFamily(ip)]) > 0 {
				r.assigned = ip.String()
				used[r.assigned] = true
				break
			}
		}
		if r.assigned == "" {
			r.unassigned = fmt.Sprintf("%s Cluster: no ClusterIP of the Service %s (%s) is left that leads to the Gateway: its EndpointSlices hold no address of that family (the Gateway is served on %s; loopback and link-local addresses cannot be endpoints)",
				r.field("routability"), name, joinAddrs(ips), strings.Join(t.servedOn(g), ", "))
		}
	}
}

// gatewayServiceIPs are the ClusterIPs of the Service name that hostgate
// keeps for a Gateway, or why there are none. A user's Service of that
// name, which hostgate leaves alone, does not lead to the Gateway.
func (t *translator) gatewayServiceIPs(name types.NamespacedName) ([]netip.Addr, string) {
	svc := t.services.last(name)
	t.dependOnService(name)
	switch {
	case svc == nil:
		return nil, fmt.Sprintf("the Service %s that hostgate keeps for the Gateway is not there yet", name)
	case svc.Addresses == nil || !svc.Addresses.Gateway:
		return nil, fmt.Sprintf("the Service %s is not hostgate's, which leaves it alone, and does not lead to the Gateway", name)
	}
	list := svc.Addresses.ClusterIPs
	if len(list) == 0 && svc.Addresses.ClusterIP != "" {
		list = []string{svc.Addresses.ClusterIP}
	}
	var ips []netip.Addr
	for _, s := range list {
		// "None" is a headless Service's.
		if ip, err := netip.ParseAddr(s); err == nil {
			ips = append(ips, ip.Unmap())
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Sprintf("the Service %s that hostgate keeps for the Gateway has no ClusterIP yet", name)
	}
	return ips, ""
}

func joinAddrs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ", ")
}

// addressStatus sets what g's status says of its addresses, and keeps g
// from being programmed when no entry of its spec.addresses is satisfied.
func (t *translator) addressStatus(g *gateway) {
	routability := func(r gatewayv1.GatewayAddressRoutabilityType) *gatewayv1.GatewayAddressRoutabilityType {
		// An API server with the standard channel's CRDs drops the
		// field, and the status would differ from the one written on
		// every pass.
		if !t.routabilityInStatus() {
			return nil
		}
		return &r
	}
	assigned := func(ok bool, reason gatewayv1.GatewayConditionReason, message string) {
		g.addressesAssigned = condition(gatewayv1.GatewayConditionAddressesAssigned, ok, reason, g.obj.Generation, message)
	}
	if len(g.requests) == 0 {
		for _, a := range t.servedOn(g) {
			g.statusAddresses = append(g.statusAddresses, gatewayv1.GatewayStatusAddress{
				Type: new(gatewayv1.IPAddressType), Value: a, Routability: routability(gatewayv1.GatewayAddressRoutabilityDefault),
			})
		}
		if g.programmed.ok() {
			assigned(true, gatewayv1.GatewayReasonAddressesAssigned, "spec.addresses is empty: served on "+t.defaultPlace())
		} else {
			assigned(false, gatewayv1.GatewayReasonAddressesNotAssigned, "spec.addresses is empty: "+g.programmed.message)
		}
		return
	}
	var missing []string
	for _, r := range g.requests {
		if r.assigned == "" {
			missing = append(missing, r.unassigned)
			continue
		}
		rt := r.routability
		if r.cluster {
			rt = gatewayv1.GatewayAddressRoutabilityCluster
		}
		g.statusAddresses = append(g.statusAddresses, gatewayv1.GatewayStatusAddress{
			Type: new(gatewayv1.IPAddressType), Value: r.assigned, Routability: routability(rt),
		})
	}
	n := len(g.requests)
	switch len(missing) {
	case 0:
		assigned(true, gatewayv1.GatewayReasonAddressesAssigned, "every entry of spec.addresses is assigned")
	case n:
		msg := "no entry of spec.addresses is assigned: " + strings.Join(missing, "; ")
		assigned(false, gatewayv1.GatewayReasonAddressesNotAssigned, msg)
		// Not served at all, not even on an address kept to back a
		// ClusterIP; this reason before any other.
		g.programmed = problem{string(gatewayv1.GatewayReasonAddressNotAssigned), msg}
	default:
		assigned(false, gatewayv1.GatewayReasonAddressesPartiallyAssigned,
			fmt.Sprintf("%d of %d entries of spec.addresses are assigned; not assigned: %s", n-len(missing), n, strings.Join(missing, "; ")))
		// An address the Gateway names and cannot use keeps it from
		// being programmed, as GatewayStaticAddresses requires; the
		// rest is served on the addresses it has.
		if !g.unusable.ok() {
			g.programmed.first(g.unusable.reason, g.unusable.message)
		}
	}
}

// defaultPlace says where a Gateway without spec.addresses is served.
func (t *translator) defaultPlace() string {
	if len(t.opts.AddressPool) > 0 {
		return "an address of the pool"
	}
	return "the node addresses"
}

// routabilityInStatus reports whether the installed CRDs carry
// spec.addresses[].routability and status.addresses[].routability: the
// experimental channel's do, the standard channel's do not, and there the
// API server drops the field from what is written.
func (t *translator) routabilityInStatus() bool {
	return t.objs.crdChannel == channelExperimental
}

// channelExperimental is the gateway.networking.k8s.io/channel of the
// experimental CRDs.
const channelExperimental = "experimental"

// poolCanBeEndpoints reports whether every address of the pool can be an
// endpoint: a Gateway served on one that cannot (loopback) has no
// ClusterIP leading to it, and no Cluster address.
func (t *translator) poolCanBeEndpoints() bool {
	n := 0
	for _, list := range endpointAddresses(t.opts.AddressPool) {
		n += len(list)
	}
	return n == len(t.opts.AddressPool)
}

// endpointAddresses sorts the addresses that can be endpoints of an
// EndpointSlice by family: the API server refuses loopback, unspecified,
// link-local and multicast ones.
func endpointAddresses(addresses []string) map[discoveryv1.AddressType][]string {
	families := map[discoveryv1.AddressType][]string{}
	for _, a := range addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsMulticast() {
			continue
		}
		family := addressFamily(ip)
		families[family] = append(families[family], ip.Unmap().String())
	}
	return families
}

// addressFamily is the EndpointSlice address type of ip.
func addressFamily(ip netip.Addr) discoveryv1.AddressType {
	if ip.Unmap().Is6() {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}
