package kubernetes_test

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// nodeCapabilities is what a node needs beyond an unprivileged process, each
// shown necessary by running the node without it (README.md, "Privileges"):
// SYS_ADMIN mounts and unmounts OverlayFS; CHOWN gives a seed's and a branch's
// directories to the postgres user; DAC_OVERRIDE and FOWNER let root reach
// into and change those directories, which are postgres's and mode 0700;
// SETUID and SETGID start Postgres as that user; KILL signals its processes.
var nodeCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID", "SYS_ADMIN"}

// TestFrontUnprivileged: a front runs as a non-root user with no capability,
// no privilege escalation, a read-only root filesystem and nothing of the host.
func TestFrontUnprivileged(t *testing.T) {
	t.Parallel()
	d := only[*appsv1.Deployment](t, loadManifests(t))
	spec := &d.Spec.Template.Spec
	c := container(t, spec)
	if role := parseArgs(t, c.Args)["role"]; role != "front" {
		t.Fatalf("the Deployment runs --role %q, want front", role)
	}
	checkNoHost(t, spec)
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Error("the front pod does not run as a non-root user (runAsNonRoot and a non-zero runAsUser)")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the front pod has no RuntimeDefault seccomp profile")
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the front container has no securityContext")
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 || sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		t.Error("the front container overrides the pod's non-root user")
	}
	checkDropsAll(t, "front", sc, nil)
	for _, v := range spec.Volumes {
		if v.Secret == nil && v.EmptyDir == nil {
			t.Errorf("front volume %s is neither a Secret nor an emptyDir: a front keeps no state", v.Name)
		}
	}
}

// TestNodePrivileges: a node runs as root (serve refuses otherwise) with
// exactly nodeCapabilities, unprivileged otherwise, on the labelled hosts, with
// its state on the host, below the volume's mount point.
func TestNodePrivileges(t *testing.T) {
	t.Parallel()
	ds := only[*appsv1.DaemonSet](t, loadManifests(t))
	spec := &ds.Spec.Template.Spec
	c := container(t, spec)
	args := parseArgs(t, c.Args)
	if args["role"] != "node" {
		t.Fatalf("the DaemonSet runs --role %q, want node", args["role"])
	}
	checkNoHost(t, spec)
	if spec.NodeSelector["pgbranch.io/node"] != "true" {
		t.Errorf("nodeSelector %v, want pgbranch.io/node=true", spec.NodeSelector)
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the node container has no securityContext")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Error("the node does not run as root: serve refuses to")
	}
	checkDropsAll(t, "node", sc, nodeCapabilities)
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the node has no RuntimeDefault seccomp profile")
	}
	checkNodeState(t, spec, c, args)
}

// checkNodeState: the only host path is the state volume, and --state-dir is
// strictly below its mount point, since serve unmounts every mount at or below
// its state directory when it starts (a volume's mount point among them).
func checkNodeState(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, args map[string]string) {
	t.Helper()
	var hostPaths []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	if !slices.Equal(hostPaths, []string{"/var/lib/pgbranchproxy"}) {
		t.Errorf("host paths %q, want only /var/lib/pgbranchproxy", hostPaths)
	}
	stateDir := flagOf(t, args, "state-dir")
	v, m := mountOf(spec, c, stateDir)
	switch {
	case v == nil || v.HostPath == nil:
		t.Errorf("--state-dir %s is not on the hostPath volume: a restarted pod would lose its branches", stateDir)
	case m.MountPath == stateDir:
		t.Errorf("--state-dir %s is the volume's mount point, which serve would try to unmount", stateDir)
	case m.ReadOnly:
		t.Errorf("the state volume is mounted read-only")
	}
}

// TestNodeGracePeriod: Kubernetes waits for a node's whole shutdown: --grace
// for sessions, then up to two minutes to stop every branch's Postgres and 5 s
// to close what is left (cmd/pgbranchproxy/serve.go).
func TestNodeGracePeriod(t *testing.T) {
	t.Parallel()
	ds := only[*appsv1.DaemonSet](t, loadManifests(t))
	c := container(t, &ds.Spec.Template.Spec)
	grace, err := time.ParseDuration(flagOf(t, parseArgs(t, c.Args), "grace"))
	if err != nil {
		t.Fatal(err)
	}
	need := grace + 2*time.Minute + 5*time.Second
	got := ds.Spec.Template.Spec.TerminationGracePeriodSeconds
	if got == nil || time.Duration(*got)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds %d, want at least %v", ptrOr(got), need.Seconds())
	}
}

// checkNoHost: no host namespaces, no service account token.
func checkNoHost(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the pod shares a host namespace")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token; pgbranchproxy makes no Kubernetes API calls")
	}
}

// checkDropsAll: not privileged, no escalation, a read-only root filesystem,
// every capability dropped and exactly add added back.
func checkDropsAll(t *testing.T, who string, sc *corev1.SecurityContext, add []corev1.Capability) {
	t.Helper()
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("the %s is privileged", who)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("the %s allows privilege escalation", who)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("the %s's root filesystem is writable", who)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("the %s does not drop ALL capabilities", who)
		return
	}
	got := slices.Sorted(slices.Values(sc.Capabilities.Add))
	if !slices.Equal(got, add) {
		t.Errorf("the %s adds capabilities %q, want %q", who, got, add)
	}
}

func ptrOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
