package watch

// Incremental translation of Ingress changes.
//
// A translation that splices (incremental.go) splices the Ingresses that
// came and went too, instead of walking every Ingress: with 10,000 of
// them that walk was most of what an Ingress change cost, reading each
// one's annotations to gather the facts of its hosts and making the key
// its memoized routes are kept under.
//
// Ingresses read each other only through the facts of hosts (nginxHosts):
// each one's routes read those of its hosts, of their www. alternatives,
// of its server-alias names and of the host "" for its defaultBackend, and
// add facts to its hosts and the hosts of its spec.tls (touchedHosts lists
// all of them, by hash). An Ingress that touches no host another touches translates
// the same alone as with all of them, and changes nothing of theirs. So
// Ingress changes splice when no Ingress of ours that stayed touches a
// host that one of ours that came or went touches; the ones that came are
// then translated with the facts of their own hosts only. Otherwise, as
// for an Ingress that shares a host, a canary (it merges into the main
// Ingress of its paths, and its report is not memoized), one being
// deleted (it gives way to every other of its host), one with
// ssl-passthrough or auth-tls-secret (they change the HTTPS socket's
// protocols and client validations, which the splice takes from the last
// translation), a change that leaves no Ingress of ours or makes the first
// (the Ingress sockets are bound or not), the translation is a full one.
//
// What a splice takes from the last translation is its ingressState,
// brought up to date in place: the memo key of each Ingress of ours (to
// delete the entries of those gone), the hashes of the hosts they touch,
// the HTTPS socket's Ingress certificates, by Ingress, and the hosts'
// client certificate checks. Each Ingress
// socket's routes start with the Ingresses' block, in Ingress order,
// where the routes of those gone are taken out and those of the ones come
// put in by key, as for routes; reports likewise. Their endpoint entries
// are counted with the routes' (endpointEntry.routeRefs).

import (
	"hash/maphash"
	"slices"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/hostgate/hostgate/router"
)

// ingressState is what a translation that splices Ingress changes reads
// of the last one's Ingresses of ours.
type ingressState struct {
	// keys are the memo keys of each Ingress's routes.
	keys map[*networkingv1.Ingress]ingressKey
	// hosts hold the hash of each host the Ingresses touch, once per
	// touch (touchedHosts), sorted. Hosts of one hash only make a splice
	// translate in full. Counting them in a map of names, then of hashes,
	// took a sixth, then a tenth, of a full translation of 10,000
	// Ingresses; appending and sorting takes a fortieth.
	hosts []uint64
	// certs are the certificates the Ingresses added to the HTTPS
	// socket, in Ingress order.
	certs []ingressCert
	// clientAuth are the client certificate checks of the hosts.
	clientAuth map[string]*hostClientAuth
}

// ingressCert is a certificate of an Ingress's spec.tls.
type ingressCert struct {
	key  sortKey
	cert Cert
}

// newIngressState returns an empty state with room for n Ingresses: last,
// the last translation's, emptied, when there is one. A full translation
// reads nothing of it, and making the maps of 10,000 Ingresses anew was
// a tenth of one.
func newIngressState(last *ingressState, n int) *ingressState {
	if last == nil {
		return &ingressState{keys: make(map[*networkingv1.Ingress]ingressKey, n), hosts: make([]uint64, 0, 2*n)}
	}
	clear(last.keys)
	return &ingressState{keys: last.keys, hosts: last.hosts[:0], certs: last.certs[:0]}
}

// add records ing, translated under key. The hosts are sorted once all
// are added.
func (st *ingressState) add(ing *networkingv1.Ingress, key ingressKey) {
	st.keys[ing] = key
	touchedHosts(ing, func(h uint64) { st.hosts = append(st.hosts, h) })
}

// touches is how many times the Ingresses touch the host of hash h.
func (st *ingressState) touches(h uint64) int32 {
	i, _ := slices.BinarySearch(st.hosts, h)
	j := i
	for j < len(st.hosts) && st.hosts[j] == h {
		j++
	}
	return int32(j - i)
}

// appendCerts appends certs, ing's, to dst.
func appendCerts(dst []ingressCert, ing *networkingv1.Ingress, certs []Cert) []ingressCert {
	for _, c := range certs {
		dst = append(dst, ingressCert{keyOf(ing), c})
	}
	return dst
}

// hostSeed seeds the hashes of touchedHosts.
var hostSeed = maphash.MakeSeed()

// touchedHosts calls touch with the hash of each host whose facts the
// translation of ing reads or adds to, as many times as ing names it.
func touchedHosts(ing *networkingv1.Ingress, touch func(uint64)) {
	hash := func(prefix, host string) {
		host = strings.ToLower(host)
		if prefix == "" {
			// A Hash written in pieces hashes as String does the
			// whole, at a few times the cost.
			touch(maphash.String(hostSeed, host))
			return
		}
		var h maphash.Hash
		h.SetSeed(hostSeed)
		h.WriteString(prefix)
		h.WriteString(host)
		touch(h.Sum64())
	}
	for _, rule := range ing.Spec.Rules {
		host := strings.ToLower(rule.Host)
		hash("", host)
		// wwwAlternative, without making the string.
		if rest, ok := strings.CutPrefix(host, "www."); ok {
			hash("", rest)
		} else {
			hash("www.", host)
		}
	}
	if ing.Spec.DefaultBackend != nil {
		hash("", "")
	}
	for _, tls := range ing.Spec.TLS {
		for _, host := range tls.Hosts {
			hash("", host)
		}
	}
	if v, ok := ing.Annotations[NginxAnnotationPrefix+"server-alias"]; ok {
		aliases, _ := parseServerAliases(v)
		for _, alias := range aliases {
			hash("", alias)
		}
	}
}

// ingressChanges are the Ingresses of ours a splice takes out and puts
// in, each in Ingress order.
type ingressChanges struct {
	gone, come []*networkingv1.Ingress
}

// spliceableIngresses returns the Ingress changes since the last
// translation when a splice can splice them (nil when none changed and
// the last translation left no ingressState: the splice then translates
// every Ingress again, as it did before), and whether it can.
func (t *translator) spliceableIngresses() (*ingressChanges, bool) {
	o := &t.order.ingresses
	st := t.prev.ingresses
	if o.allNew {
		return nil, false
	}
	if len(o.added) == 0 && len(o.removed) == 0 {
		if st == nil {
			return nil, true
		}
		return &ingressChanges{}, true
	}
	if st == nil || !o.strict || !o.wasStrict {
		return nil, false
	}
	if s := t.ingressSockets(); len(s) == 2 && s[0] == s[1] {
		// One address for both: each Ingress's routes are placed on
		// it twice, which one block does not hold.
		return nil, false
	}
	gone, okGone := t.spliceableOfOurs(o.removed)
	come, okCome := t.spliceableOfOurs(o.added)
	if !okGone || !okCome {
		return nil, false
	}
	// With the first Ingress of ours, or without the last, the Ingress
	// sockets are bound or not, which may turn Gateway listeners away or
	// let them in.
	if n := len(st.keys) - len(gone) + len(come); (n > 0) != (len(st.keys) > 0) {
		return nil, false
	}
	// Each host an Ingress gone touched is touched by as many fewer:
	// those that stayed are what is left.
	touchedByGone := map[uint64]int32{}
	for _, ing := range gone {
		touchedHosts(ing, func(h uint64) { touchedByGone[h]++ })
	}
	shared := false
	for _, ing := range slices.Concat(gone, come) {
		touchedHosts(ing, func(h uint64) { shared = shared || st.touches(h) > touchedByGone[h] })
	}
	if shared {
		return nil, false
	}
	return &ingressChanges{gone: gone, come: come}, true
}

// spliceableOfOurs returns the Ingresses of ours among list, in Ingress
// order, and whether each of them may come or go in a splice, its hosts
// aside.
func (t *translator) spliceableOfOurs(list []*networkingv1.Ingress) ([]*networkingv1.Ingress, bool) {
	var ours []*networkingv1.Ingress
	for _, ing := range list {
		if !t.ourIngress(ing) {
			continue
		}
		a := ing.Annotations
		if isNginxCanary(ing) || t.yields(ing) || a[NginxAnnotationPrefix+"auth-tls-secret"] != "" ||
			t.opts.IngressSSLPassthrough && hasKey(a, NginxAnnotationPrefix+"ssl-passthrough") {
			return nil, false
		}
		ours = append(ours, ing)
	}
	sortObjects(ours)
	return ours, true
}

// uncountGoneIngresses takes back the endpoint entries the Ingresses a
// splice takes out registered.
func (t *translator) uncountGoneIngresses() {
	if c := t.splice.ingresses; c != nil {
		for _, ing := range c.gone {
			t.countPorts(t.prev.objects[t.prev.ingresses.keys[ing]], -1)
		}
	}
}

// spliceIngresses is ingresses splicing the Ingress changes into the last
// translation's results, on sockets, the Ingress sockets.
func (t *translator) spliceIngresses(sockets []*socket) {
	c, st := t.splice.ingresses, t.prev.ingresses
	t.next.ingresses = st
	goneKeys := make([]sortKey, 0, len(c.gone))
	for _, ing := range c.gone {
		goneKeys = append(goneKeys, keyOf(ing))
		delete(t.next.objects, st.keys[ing])
		delete(st.keys, ing)
		touchedHosts(ing, func(h uint64) {
			i, _ := slices.BinarySearch(st.hosts, h)
			st.hosts = slices.Delete(st.hosts, i, i+1)
		})
	}
	placed := map[*socket][]*router.Route{}
	var reports []IngressReport
	var certs []ingressCert
	if len(c.come) > 0 {
		// No Ingress that stayed touches their hosts: their facts are
		// theirs alone.
		hosts := t.nginxHosts(c.come)
		loadBalancer := t.ingressStatus
		for _, ing := range c.come {
			report, own, _ := t.ingress(ing, hosts, sockets, st, func(s *socket, r router.Route) { placed[s] = append(placed[s], &r) })
			report.LoadBalancer = loadBalancer
			reports = append(reports, report)
			certs = appendCerts(certs, ing, own)
		}
		slices.Sort(st.hosts)
	}
	for _, s := range sockets {
		// The block of every Ingress route on the socket, in one piece
		// at its start, as Ingresses are placed before any route.
		hi := sort.Search(len(s.last), func(i int) bool {
			k := s.last[i].ID.Kind
			return k != router.KindIngress && k != router.KindIngressPassthrough
		})
		t.splice.at[s] = hi
		t.spliceBlock(s, s.last[:hi], router.KindIngress, goneKeys, placed[s])
	}
	if len(goneKeys) > 0 || len(certs) > 0 {
		st.certs = spliceSorted(make([]ingressCert, 0, len(st.certs)+len(certs)), st.certs, goneKeys, certs,
			func(c *ingressCert) sortKey { return c.key })
	}
	for _, s := range sockets {
		if s.protocol == ProtocolHTTPS {
			for _, c := range st.certs {
				s.certs = append(s.certs, c.cert)
			}
			(&nginxHosts{clientAuth: st.clientAuth}).clientValidations(s)
		}
	}
	last := t.prev.reports.Ingresses
	switch {
	case len(st.keys) == 0:
		t.reports.Ingresses = nil // as a full translation leaves it
	case len(goneKeys) == 0 && len(reports) == 0:
		t.reports.Ingresses = last
	default:
		t.reports.Ingresses = spliceSorted(make([]IngressReport, 0, len(last)+len(reports)), last, goneKeys, reports,
			func(r *IngressReport) sortKey { return keyOf(r.Object) })
	}
}
