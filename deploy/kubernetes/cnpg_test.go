package kubernetes_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cnpgCluster is the part of CloudNativePG's Cluster (postgresql.cnpg.io/v1,
// api/v1/cluster_types.go in cloudnative-pg) that catalog/cnpg-cluster.yaml
// uses, with the same JSON names. CloudNativePG's own Go module is not served
// by the module proxy this project builds with, so the strict decoder checks
// the example against these fields: a field that is not here is refused, one
// that is here is checked by name and type, not against the operator's CRD.
type cnpgCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Instances  int `json:"instances"`
		PostgreSQL struct {
			Synchronous *struct {
				Method string `json:"method"`
				Number int    `json:"number"`
			} `json:"synchronous"`
		} `json:"postgresql"`
		Bootstrap struct {
			InitDB struct {
				Database string `json:"database"`
				Owner    string `json:"owner"`
			} `json:"initdb"`
		} `json:"bootstrap"`
		Storage struct {
			Size string `json:"size"`
		} `json:"storage"`
		Resources corev1.ResourceRequirements `json:"resources"`
	} `json:"spec"`
}

// TestCatalogCluster: the example catalog has three instances and commits wait
// for a standby, so a committed claim or registration outlives its primary.
func TestCatalogCluster(t *testing.T) {
	t.Parallel()
	c := only[*cnpgCluster](t, loadManifests(t))
	s := c.Spec
	if s.Instances != 3 {
		t.Errorf("instances %d, want 3", s.Instances)
	}
	sync := s.PostgreSQL.Synchronous
	switch {
	case sync == nil:
		t.Error("no spec.postgresql.synchronous: replication is asynchronous")
	case sync.Method != "any" && sync.Method != "first":
		t.Errorf("synchronous method %q, want any or first", sync.Method)
	case sync.Number < 1 || sync.Number >= s.Instances:
		t.Errorf("synchronous number %d of %d instances, want 1 to %d", sync.Number, s.Instances, s.Instances-1)
	}
	if s.Bootstrap.InitDB.Database == "" || s.Bootstrap.InitDB.Owner == "" {
		t.Error("bootstrap.initdb names no database and owner: the app Secret the README uses would not be made")
	}
	if s.Storage.Size == "" {
		t.Error("no storage size")
	}
}
