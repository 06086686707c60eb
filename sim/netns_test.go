package sim

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// network is the simulation's wiring: a switch (a bridge alone in a namespace of
// its own) and hosts, each a namespace with one veth whose other end is a port of
// the switch. The machine's own namespace holds none of it, so no packet of the
// simulation can reach anything but its hosts.
type network struct {
	prefix string       // of every namespace: "pgbsim-<pid>-"
	subnet netip.Prefix // the hosts' /24
	hosts  map[string]*host
}

// host is one simulated machine.
type host struct {
	name string     // "n1"
	ns   string     // its namespace: prefix + name
	addr netip.Addr // on the switch's subnet
}

// runPrefix names everything this process makes; sweepLeftovers parses it back.
func runPrefix() string { return fmt.Sprintf("pgbsim-%d-", os.Getpid()) }

// ip runs an iproute2 command and returns its error with its output.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetwork makes the switch and one host per name, numbered from .10 on a /24
// that no address or route of the machine overlaps. Everything is removed when
// the test ends, by t.Cleanup.
func newNetwork(t *testing.T, names ...string) *network {
	t.Helper()
	subnet, err := freeSubnet(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	n := &network{prefix: runPrefix(), subnet: subnet, hosts: map[string]*host{}}
	t.Cleanup(func() { n.remove(t) })
	sw := n.prefix + "sw"
	for _, args := range [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "add", "br0", "type", "bridge"},
		{"-n", sw, "link", "set", "dev", "br0", "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		n.addHost(t, name)
	}
	return n
}

// addHost makes one more host, numbered after the others (from .10), with its
// veth into the switch.
func (n *network) addHost(t *testing.T, name string) *host {
	t.Helper()
	a := n.subnet.Addr().As4()
	a[3] = byte(10 + len(n.hosts))
	h := &host{name: name, ns: n.prefix + name, addr: netip.AddrFrom4(a)}
	n.hosts[name] = h
	port, sw := "p-"+name, n.prefix+"sw"
	for _, args := range [][]string{
		{"netns", "add", h.ns},
		{"-n", h.ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", sw},
		{"-n", sw, "link", "set", "dev", port, "master", "br0", "up"},
		{"-n", h.ns, "addr", "add", h.addr.String() + "/24", "dev", "eth0"},
		{"-n", h.ns, "link", "set", "dev", "lo", "up"},
		{"-n", h.ns, "link", "set", "dev", "eth0", "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// cut takes the host's link down: from then on it reaches no other host and no
// host reaches it, silently (nothing answers its packets), as a cut cable would.
func (n *network) cut(h *host) error { return ip("-n", h.ns, "link", "set", "dev", "eth0", "down") }

// heal brings the host's link back up.
func (n *network) heal(h *host) error { return ip("-n", h.ns, "link", "set", "dev", "eth0", "up") }

// blackhole drops, on host h, every packet it sends to dst: h reaches every
// other host as before, and dst nothing of h (dst's answers to h are routed as
// usual, but nothing of h reaches it to be answered), as a partition between the
// two alone would.
func (n *network) blackhole(h, dst *host) error {
	return ip("-n", h.ns, "route", "add", "blackhole", dst.addr.String()+"/32")
}

// unblackhole removes blackhole's route.
func (n *network) unblackhole(h, dst *host) error {
	return ip("-n", h.ns, "route", "del", "blackhole", dst.addr.String()+"/32")
}

// remove deletes the hosts and the switch. A namespace that still holds a
// process is an error of the test (everything it starts is stopped before): the
// process is killed, by its id, so that the namespace can go.
func (n *network) remove(t *testing.T) {
	for _, ns := range n.namespaces() {
		if _, err := os.Stat(netnsPath(ns)); err != nil {
			continue // never made
		}
		for _, pid := range netnsPIDs(ns) {
			if pid == os.Getpid() {
				t.Errorf("this test's own main thread is in namespace %s", ns)
				continue
			}
			t.Errorf("process %d (%s) still in namespace %s: killed", pid, procComm(pid), ns)
			killPID(pid)
		}
		if err := ip("netns", "del", ns); err != nil {
			t.Error(err)
		}
	}
}

func (n *network) namespaces() []string {
	out := []string{n.prefix + "sw"}
	for _, h := range n.hosts {
		out = append(out, h.ns)
	}
	return out
}

// freeSubnet picks a 10.77.x.0/24, starting from a number derived from seed, that
// overlaps no address or route of the machine's own namespace.
func freeSubnet(seed int) (netip.Prefix, error) {
	used, err := usedPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	for i := range 256 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, byte((seed + i) % 256), 0}), 24)
		free := true
		for _, u := range used {
			if u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /24 in 10.77.0.0/16: the machine's routes cover it all")
}

// usedPrefixes lists the destinations of every IPv4 route of the machine's own
// namespace, in every table (the local table holds its addresses); the default
// route is left out, since it overlaps everything.
func usedPrefixes() ([]netip.Prefix, error) {
	out, err := exec.Command("ip", "-4", "-j", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route: %w", err)
	}
	var routes []struct {
		Dst string `json:"dst"`
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("ip route: %w", err)
	}
	var used []netip.Prefix
	for _, r := range routes {
		if r.Dst == "default" || r.Dst == "" {
			continue
		}
		if !strings.Contains(r.Dst, "/") {
			r.Dst += "/32"
		}
		if p, err := netip.ParsePrefix(r.Dst); err == nil {
			used = append(used, p)
		}
	}
	return used, nil
}
