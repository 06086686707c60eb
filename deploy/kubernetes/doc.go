// Package kubernetes holds pgbranchproxy's Kubernetes manifests: fronts
// (front.yaml), nodes (node.yaml), the namespace, and an example catalog
// (catalog/cnpg-cluster.yaml). It has no code; its tests decode every object
// into its typed Kubernetes API struct with unknown fields refused, check the
// containers' flags against serve's own, the pods' privileges and the wiring of
// labels, ports and Secrets, and (without -short, as root, with Docker) run the
// node's container as node.yaml specifies it.
package kubernetes
