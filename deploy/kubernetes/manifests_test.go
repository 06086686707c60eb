package kubernetes_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// namespace is where every namespaced object of the manifests lives.
const namespace = "pgbranch"

// object is one decoded YAML document of the manifests.
type object struct {
	file string // relative to this directory
	kind string // apiVersion and kind, "apps/v1 Deployment"
	obj  any    // a pointer to its typed struct
}

// newObject returns an empty typed struct for an apiVersion and kind, nil for
// one the manifests should not hold.
func newObject(kind string) any {
	switch kind {
	case "v1 Namespace":
		return &corev1.Namespace{}
	case "v1 Service":
		return &corev1.Service{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "postgresql.cnpg.io/v1 Cluster":
		return &cnpgCluster{}
	}
	return nil
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes one YAML document into its typed struct: duplicate
// keys, fields the struct does not have, and fields whose case differs from
// the struct's are refused, as the API server's strict field validation does.
func decodeStrict(doc []byte) (string, any, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return "", nil, err
	}
	var tm metav1.TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return "", nil, err
	}
	kind := tm.APIVersion + " " + tm.Kind
	obj := newObject(kind)
	if obj == nil {
		return kind, nil, fmt.Errorf("no typed struct for %q", kind)
	}
	strict, err := sigsjson.UnmarshalStrict(js, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return kind, nil, err
	}
	if len(strict) > 0 {
		return kind, nil, fmt.Errorf("%s: %w", kind, strict[0])
	}
	return kind, obj, nil
}

// loadManifests decodes every YAML document under this directory.
func loadManifests(t *testing.T) []object {
	t.Helper()
	var out []object
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, doc := range docSeparator.Split(string(data), -1) {
			if isBlank(doc) {
				continue
			}
			kind, obj, err := decodeStrict([]byte(doc))
			if err != nil {
				return fmt.Errorf("%s, document %d: %w", path, i+1, err)
			}
			out = append(out, object{file: path, kind: kind, obj: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// isBlank: a document of nothing but comments and blank lines.
func isBlank(doc string) bool {
	for line := range strings.Lines(doc) {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// only returns the one object of type T in objs, failing unless there is
// exactly one.
func only[T any](t *testing.T, objs []object) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %T in the manifests, found %d", *new(T), len(found))
	}
	return found[0]
}

// TestManifestsDecode: every document decodes into its typed struct, the
// manifests hold each object the deployment needs once, and every namespaced
// object is in the namespace.
func TestManifestsDecode(t *testing.T) {
	t.Parallel()
	objs := loadManifests(t)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.kind)
		meta := metaOf(o.obj)
		if meta.Name == "" {
			t.Errorf("%s: a %s without a name", o.file, o.kind)
		}
		if _, isNS := o.obj.(*corev1.Namespace); isNS {
			if meta.Name != namespace {
				t.Errorf("%s: namespace %q, want %q", o.file, meta.Name, namespace)
			}
		} else if meta.Namespace != namespace {
			t.Errorf("%s: %s %s in namespace %q, want %q", o.file, o.kind, meta.Name, meta.Namespace, namespace)
		}
	}
	slices.Sort(kinds)
	want := []string{"apps/v1 DaemonSet", "apps/v1 Deployment", "networking.k8s.io/v1 NetworkPolicy",
		"policy/v1 PodDisruptionBudget", "postgresql.cnpg.io/v1 Cluster", "v1 Namespace", "v1 Service"}
	if !slices.Equal(kinds, want) {
		t.Errorf("objects %q, want %q", kinds, want)
	}
}

func metaOf(obj any) metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.Namespace:
		return o.ObjectMeta
	case *corev1.Service:
		return o.ObjectMeta
	case *appsv1.Deployment:
		return o.ObjectMeta
	case *appsv1.DaemonSet:
		return o.ObjectMeta
	case *policyv1.PodDisruptionBudget:
		return o.ObjectMeta
	case *networkingv1.NetworkPolicy:
		return o.ObjectMeta
	case *cnpgCluster:
		return o.ObjectMeta
	}
	panic(fmt.Sprintf("no metadata for %T", obj))
}

// TestDecodeStrictRefuses: the decoder the checks rely on refuses what the
// API server would not take as written.
func TestDecodeStrictRefuses(t *testing.T) {
	t.Parallel()
	const good = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n    - port: 6432\n"
	if _, _, err := decodeStrict([]byte(good)); err != nil {
		t.Fatalf("a valid Service: %v", err)
	}
	for _, tc := range []struct{ name, doc string }{
		{"unknown field", strings.Replace(good, "ports:", "portz:", 1)},
		{"field of another case", strings.Replace(good, "ports:", "Ports:", 1)},
		{"duplicate key", strings.Replace(good, "  name: s\n", "  name: s\n  name: t\n", 1)},
		{"wrong type", strings.Replace(good, "port: 6432", "port: [6432]", 1)},
		{"unknown kind", strings.Replace(good, "kind: Service", "kind: Servic", 1)},
		{"unknown field of a CNPG Cluster", "apiVersion: postgresql.cnpg.io/v1\nkind: Cluster\nmetadata:\n  name: c\nspec:\n  instances: 3\n  instance: 3\n"},
	} {
		if _, _, err := decodeStrict([]byte(tc.doc)); err == nil {
			t.Errorf("%s: decoded, want an error", tc.name)
		}
	}
}

// TestReadmeNamesSecrets: every Secret the manifests read is one README.md says
// how to create.
func TestReadmeNamesSecrets(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range podSpecs(t, loadManifests(t)) {
		for _, name := range secretsOf(spec) {
			if !bytes.Contains(readme, []byte(name)) {
				t.Errorf("README.md does not name the Secret %s", name)
			}
		}
	}
}
