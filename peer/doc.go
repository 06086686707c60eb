// Package peer is what nodes serve each other: copies of settled seeds.
//
// A seed is built on one node; a node that is to serve branches of it fetches
// it from the builder (or any node that holds a copy) with one request,
// GET /v1/seeds/<id>, whose answer is the seed's manifest (package seedcopy),
// length-prefixed, followed by the seedcopy stream of its files. The fetching
// node checks the manifest against the digest the catalog records for the seed,
// and every file against the manifest, before the copy is used.
//
// Between nodes of a cluster (serve --cluster-dir) the listener requires mutual
// TLS with certificates of the role node (cluster.Member.PeerListenerConfig); a
// node without cluster credentials serves plain HTTP, under the same rule as its
// session listener: loopback, or a private network it was told to trust.
package peer
