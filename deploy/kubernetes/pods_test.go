package kubernetes_test

import (
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// podSpecs returns the pod templates' specs by "Kind/name".
func podSpecs(t *testing.T, objs []object) map[string]*corev1.PodSpec {
	t.Helper()
	out := map[string]*corev1.PodSpec{}
	for _, o := range objs {
		switch w := o.obj.(type) {
		case *appsv1.Deployment:
			out["Deployment/"+w.Name] = &w.Spec.Template.Spec
		case *appsv1.DaemonSet:
			out["DaemonSet/"+w.Name] = &w.Spec.Template.Spec
		}
	}
	if len(out) == 0 {
		t.Fatal("no pod templates in the manifests")
	}
	return out
}

// container returns the one container of spec, failing unless there is one.
func container(t *testing.T, spec *corev1.PodSpec) *corev1.Container {
	t.Helper()
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("want one container, found %d (and %d init containers)", len(spec.Containers), len(spec.InitContainers))
	}
	return &spec.Containers[0]
}

// secretsOf lists the Secrets a pod spec reads, through volumes and env.
func secretsOf(spec *corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	return out
}

// mountOf returns the volume mounted at or above path in c and its mount,
// the deepest one if several.
func mountOf(spec *corev1.PodSpec, c *corev1.Container, path string) (*corev1.Volume, *corev1.VolumeMount) {
	var best *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if within(path, m.MountPath) && (best == nil || len(m.MountPath) > len(best.MountPath)) {
			best = &c.VolumeMounts[i]
		}
	}
	if best == nil {
		return nil, nil
	}
	for i, v := range spec.Volumes {
		if v.Name == best.Name {
			return &spec.Volumes[i], best
		}
	}
	return nil, best
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// envFrom returns the field path a variable of c comes from (downward API),
// or "" if it does not come from one.
func envFrom(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

// secretEnv returns the Secret and key a variable of c comes from.
func secretEnv(c *corev1.Container, name string) (secret, key string) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key
		}
	}
	return "", ""
}
