package kubernetes_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// pod runs one pod template's container under Docker as Kubernetes would run
// it, as far as Docker can: its user, groups, capabilities, read-only root,
// no-new-privileges, seccomp and AppArmor choices, volumes, environment (the
// downward API and Secrets filled in by the test) and args with $(VAR)
// expanded. Docker's default seccomp profile stands in for RuntimeDefault.
type pod struct {
	name      string
	image     string
	network   string
	ip        string            // the pod IP
	nodeName  string            // spec.nodeName
	hostPaths map[string]string // hostPath path -> directory of this host
	secrets   map[string]string // Secret name -> directory of its files
	values    map[string]string // "secret/key" -> value, for secretKeyRef
	without   []corev1.Capability
}

// dockerArgs returns the docker run flags for c of spec.
func (p *pod) dockerArgs(t *testing.T, spec *corev1.PodSpec, c *corev1.Container) []string {
	t.Helper()
	args := []string{"run", "-d", "--name", p.name, "--network", p.network, "--ip", p.ip}
	args = append(args, p.securityArgs(t, spec, c)...)
	args = append(args, p.volumeArgs(t, spec, c)...)
	env := p.env(t, c)
	for _, e := range c.Env {
		args = append(args, "-e", e.Name+"="+env[e.Name])
	}
	args = append(args, p.image)
	for _, a := range c.Args {
		args = append(args, expand(a, env))
	}
	return args
}

func (p *pod) securityArgs(t *testing.T, spec *corev1.PodSpec, c *corev1.Container) []string {
	t.Helper()
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	var args []string
	uid, gid := cmpPtr(sc.RunAsUser, psc.RunAsUser), cmpPtr(sc.RunAsGroup, psc.RunAsGroup)
	if uid != nil {
		args = append(args, "--user", fmt.Sprintf("%d:%d", *uid, ptrOr(gid)))
	}
	if psc.FSGroup != nil {
		args = append(args, "--group-add", strconv.FormatInt(*psc.FSGroup, 10))
	}
	if sc.Privileged != nil && *sc.Privileged {
		args = append(args, "--privileged")
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		args = append(args, "--read-only")
	}
	if caps := sc.Capabilities; caps != nil {
		for _, d := range caps.Drop {
			args = append(args, "--cap-drop", string(d))
		}
		for _, a := range caps.Add {
			if !slices.Contains(p.without, a) {
				args = append(args, "--cap-add", string(a))
			}
		}
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp != nil && seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Fatalf("seccomp profile %s: only RuntimeDefault (Docker's default) is run here", seccomp.Type)
	}
	if aa := sc.AppArmorProfile; aa != nil && aa.Type == corev1.AppArmorProfileTypeUnconfined {
		args = append(args, "--security-opt", "apparmor=unconfined")
	}
	return args
}

func (p *pod) volumeArgs(t *testing.T, spec *corev1.PodSpec, c *corev1.Container) []string {
	t.Helper()
	var args []string
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Fatalf("volume %s is not in the pod", m.Name)
		}
		v := spec.Volumes[i]
		ro := ""
		if m.ReadOnly {
			ro = ":ro"
		}
		switch {
		case v.HostPath != nil:
			args = append(args, "-v", p.hostPaths[v.HostPath.Path]+":"+m.MountPath+ro)
		case v.Secret != nil:
			args = append(args, "-v", p.secrets[v.Secret.SecretName]+":"+m.MountPath+":ro")
		case v.EmptyDir != nil:
			args = append(args, "--tmpfs", m.MountPath)
		default:
			t.Fatalf("volume %s: only hostPath, Secret and emptyDir are run here", v.Name)
		}
	}
	return args
}

// env returns the container's variables as Kubernetes would set them.
func (p *pod) env(t *testing.T, c *corev1.Container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = expand(e.Value, out)
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "status.podIP":
				out[e.Name] = p.ip
			case "spec.nodeName":
				out[e.Name] = p.nodeName
			case "metadata.name":
				out[e.Name] = p.name
			default:
				t.Fatalf("%s: field %s is not run here", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			v, ok := p.values[ref]
			if !ok {
				t.Fatalf("%s: the test has no value for Secret key %s", e.Name, ref)
			}
			out[e.Name] = v
		default:
			t.Fatalf("%s: this kind of valueFrom is not run here", e.Name)
		}
	}
	return out
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) with a defined variable, as Kubernetes does in args.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := env[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

func cmpPtr(a, b *int64) *int64 {
	if a != nil {
		return a
	}
	return b
}

// start runs the container and waits until its readiness probe's TCP port
// accepts, as the kubelet's probe would.
func (p *pod) start(t *testing.T, ctx context.Context, spec *corev1.PodSpec) {
	t.Helper()
	c := container(t, spec)
	docker(t, p.dockerArgs(t, spec, c)...)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", p.name).Run() })
	p.waitReady(t, ctx, c)
}

func (p *pod) waitReady(t *testing.T, ctx context.Context, c *corev1.Container) {
	t.Helper()
	if c.ReadinessProbe == nil || c.ReadinessProbe.TCPSocket == nil {
		t.Fatalf("%s has no TCP readiness probe", c.Name)
	}
	addr := net.JoinHostPort(p.ip, strconv.Itoa(containerPort(t, c, c.ReadinessProbe.TCPSocket.Port.String())))
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if ctx.Err() != nil || !p.running(t) {
			t.Fatalf("%s never became ready on %s: %v\n%s", p.name, addr, err, p.logs(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *pod) running(t *testing.T) bool {
	return strings.TrimSpace(docker(t, "inspect", "-f", "{{.State.Running}}", p.name)) == "true"
}

func (p *pod) logs(t *testing.T) string {
	out, _ := exec.Command("docker", "logs", "--tail", "40", p.name).CombinedOutput()
	return string(out)
}

// docker runs a docker command and returns its standard output.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("docker %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// dockerNetwork creates a bridge network with a subnet of its own, so that
// pods get the addresses the test gives them (a node must know its pod IP
// when it starts), and returns its name and prefix ("10.231.7.").
func dockerNetwork(t *testing.T) (string, string) {
	t.Helper()
	name := fmt.Sprintf("pgbranch-k8s-test-%d", rand.IntN(1<<30))
	var err error
	for range 8 {
		prefix := fmt.Sprintf("10.%d.%d.", 200+rand.IntN(50), rand.IntN(256))
		var out []byte
		out, err = exec.Command("docker", "network", "create", "--subnet", prefix+"0/24", name).CombinedOutput()
		if err == nil {
			t.Cleanup(func() { exec.Command("docker", "network", "rm", name).Run() })
			return name, prefix
		}
		err = fmt.Errorf("%w: %s", err, out)
	}
	t.Fatalf("create a docker network: %v", err)
	return "", ""
}
