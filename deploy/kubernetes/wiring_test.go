package kubernetes_test

import (
	"net"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// deployment gathers the objects whose labels, selectors and ports must agree.
type deployment struct {
	front   *appsv1.Deployment
	node    *appsv1.DaemonSet
	service *corev1.Service
	pdb     *policyv1.PodDisruptionBudget
	policy  *networkingv1.NetworkPolicy
}

func loadDeployment(t *testing.T) deployment {
	objs := loadManifests(t)
	return deployment{
		front:   only[*appsv1.Deployment](t, objs),
		node:    only[*appsv1.DaemonSet](t, objs),
		service: only[*corev1.Service](t, objs),
		pdb:     only[*policyv1.PodDisruptionBudget](t, objs),
		policy:  only[*networkingv1.NetworkPolicy](t, objs),
	}
}

// selects reports whether sel (nil: nothing) selects a pod with these labels.
func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

// TestSelectors: each workload selects its own pods; the Service and the PDB
// select fronts and no node; the NetworkPolicy applies to nodes and lets in
// fronts only.
func TestSelectors(t *testing.T) {
	t.Parallel()
	d := loadDeployment(t)
	fronts, nodes := d.front.Spec.Template.Labels, d.node.Spec.Template.Labels
	for _, c := range []struct {
		what      string
		sel       *metav1.LabelSelector
		pods      map[string]string
		wantMatch bool
	}{
		{"the Deployment's selector, its pods", d.front.Spec.Selector, fronts, true},
		{"the Deployment's selector, nodes", d.front.Spec.Selector, nodes, false},
		{"the DaemonSet's selector, its pods", d.node.Spec.Selector, nodes, true},
		{"the DaemonSet's selector, fronts", d.node.Spec.Selector, fronts, false},
		{"the Service's selector, fronts", &metav1.LabelSelector{MatchLabels: d.service.Spec.Selector}, fronts, true},
		{"the Service's selector, nodes", &metav1.LabelSelector{MatchLabels: d.service.Spec.Selector}, nodes, false},
		{"the PDB's selector, fronts", d.pdb.Spec.Selector, fronts, true},
		{"the PDB's selector, nodes", d.pdb.Spec.Selector, nodes, false},
		{"the NetworkPolicy's pods, nodes", &d.policy.Spec.PodSelector, nodes, true},
		{"the NetworkPolicy's pods, fronts", &d.policy.Spec.PodSelector, fronts, false},
	} {
		if got := selects(t, c.sel, c.pods); got != c.wantMatch {
			t.Errorf("%s: selects %t, want %t", c.what, got, c.wantMatch)
		}
	}
	if d.pdb.Spec.MinAvailable == nil || d.front.Spec.Replicas == nil ||
		d.pdb.Spec.MinAvailable.IntValue() < 1 || d.pdb.Spec.MinAvailable.IntValue() >= int(*d.front.Spec.Replicas) {
		t.Error("the PDB's minAvailable is not between 1 and the fronts' replicas less one: no front could be evicted, or all could")
	}
}

// TestNetworkPolicy: a node's ingress is its serving port, from fronts, and
// its peer port, from nodes (seed copies) and fronts (admin requests).
func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	d := loadDeployment(t)
	p := d.policy.Spec
	if len(p.PolicyTypes) != 1 || p.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policyTypes %v, want [Ingress]", p.PolicyTypes)
	}
	c := container(t, &d.node.Spec.Template.Spec)
	args := parseArgs(t, c.Args)
	if len(p.Ingress) != 2 {
		t.Fatalf("%d ingress rules, want two", len(p.Ingress))
	}
	for i, want := range []struct {
		flag string
		from []map[string]string
	}{
		{"listen", []map[string]string{d.front.Spec.Template.Labels}},
		{"peer-listen", []map[string]string{d.node.Spec.Template.Labels, d.front.Spec.Template.Labels}},
	} {
		port, rule := listenPort(t, flagOf(t, args, want.flag)), p.Ingress[i]
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.IntValue() != port ||
			rule.Ports[0].Protocol == nil || *rule.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("rule %d: ingress ports %v, want TCP %d (the node's --%s)", i, rule.Ports, port, want.flag)
		}
		if len(rule.From) != len(want.from) {
			t.Fatalf("rule %d: ingress from %d peers, want %d (none is anywhere)", i, len(rule.From), len(want.from))
		}
		for j, from := range rule.From {
			if from.IPBlock != nil || from.NamespaceSelector != nil || !selects(t, from.PodSelector, want.from[j]) {
				t.Errorf("rule %d: ingress from %+v: want only the pods of %v in this namespace", i, from, want.from[j])
			}
		}
		if containerPort(t, c, strconv.Itoa(port)) != port {
			t.Errorf("the node does not declare its port %d (--%s)", port, want.flag)
		}
	}
	if selects(t, p.Ingress[0].From[0].PodSelector, d.node.Spec.Template.Labels) {
		t.Error("nodes may reach other nodes' serving port")
	}
}

// TestPorts: the Service reaches the front's --listen port, and a node
// advertises its pod IP and its --listen port.
func TestPorts(t *testing.T) {
	t.Parallel()
	d := loadDeployment(t)
	fc := container(t, &d.front.Spec.Template.Spec)
	frontPort := listenPort(t, flagOf(t, parseArgs(t, fc.Args), "listen"))
	if len(d.service.Spec.Ports) != 1 {
		t.Fatalf("the Service has %d ports, want one", len(d.service.Spec.Ports))
	}
	sp := d.service.Spec.Ports[0]
	if sp.Port != 6432 || sp.Protocol != corev1.ProtocolTCP || containerPort(t, fc, sp.TargetPort.String()) != frontPort {
		t.Errorf("Service port %d -> %s, want TCP 6432 -> the front's --listen port %d", sp.Port, sp.TargetPort.String(), frontPort)
	}
	nc := container(t, &d.node.Spec.Template.Spec)
	args := parseArgs(t, nc.Args)
	nodePort := listenPort(t, flagOf(t, args, "listen"))
	host, port, err := net.SplitHostPort(args["advertise"])
	if err != nil || host != "$(POD_IP)" || port != strconv.Itoa(nodePort) || envFrom(nc, "POD_IP") != "status.podIP" {
		t.Errorf("--advertise %q, want $(POD_IP):%d with POD_IP from status.podIP", args["advertise"], nodePort)
	}
	if containerPort(t, nc, strconv.Itoa(nodePort)) != nodePort {
		t.Errorf("the node does not declare its port %d", nodePort)
	}
}

// TestClusterIdentity: a node's name in the cluster, which becomes its node
// id, is its host's: one node per host, named as that host's certificate in
// the Secret.
func TestClusterIdentity(t *testing.T) {
	t.Parallel()
	d := loadDeployment(t)
	nc := container(t, &d.node.Spec.Template.Spec)
	if name := parseArgs(t, nc.Args)["cluster-name"]; name != "$(NODE_NAME)" || envFrom(nc, "NODE_NAME") != "spec.nodeName" {
		t.Errorf("the node's --cluster-name %q, want $(NODE_NAME) from spec.nodeName", name)
	}
	fc := container(t, &d.front.Spec.Template.Spec)
	if parseArgs(t, fc.Args)["cluster-name"] == "" {
		t.Error("the front has no --cluster-name")
	}
}

// TestSecretsMounted: both read the catalog from the same Secret, and every
// file flag names a path on a read-only Secret volume.
func TestSecretsMounted(t *testing.T) {
	t.Parallel()
	d := loadDeployment(t)
	var catalogs []string
	for _, spec := range []*corev1.PodSpec{&d.front.Spec.Template.Spec, &d.node.Spec.Template.Spec} {
		c := container(t, spec)
		name, key := secretEnv(c, "PGBRANCH_CATALOG")
		if name == "" {
			t.Errorf("%s: PGBRANCH_CATALOG does not come from a Secret", c.Name)
		}
		catalogs = append(catalogs, name+"/"+key)
		args := parseArgs(t, c.Args)
		if _, ok := args["catalog"]; ok {
			t.Errorf("%s: --catalog on the command line, where its password shows", c.Name)
		}
		for _, f := range []string{"cluster-dir", "tls-cert", "tls-key"} {
			path, ok := args[f]
			if !ok {
				continue
			}
			v, m := mountOf(spec, c, path)
			if v == nil || v.Secret == nil || !m.ReadOnly {
				t.Errorf("%s: --%s %s is not on a read-only Secret volume", c.Name, f, path)
			}
		}
		if args["cluster-dir"] == "" {
			t.Errorf("%s: no --cluster-dir: fronts and nodes would speak without mutual TLS", c.Name)
		}
	}
	if catalogs[0] != catalogs[1] {
		t.Errorf("fronts read the catalog from %s, nodes from %s", catalogs[0], catalogs[1])
	}
}

// listenPort returns the port of a --listen address.
func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--listen %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("--listen %q: %v", addr, err)
	}
	return n
}

// containerPort returns the TCP port of c named or numbered ref, 0 if none.
func containerPort(t *testing.T, c *corev1.Container, ref string) int {
	t.Helper()
	for _, p := range c.Ports {
		if (p.Name == ref || strconv.Itoa(int(p.ContainerPort)) == ref) && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
			return int(p.ContainerPort)
		}
	}
	if !strings.ContainsAny(ref, "0123456789") {
		t.Errorf("%s declares no port %q", c.Name, ref)
	}
	return 0
}
