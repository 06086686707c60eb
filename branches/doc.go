// Package branches owns the lifecycle of copy-on-write branches: it creates them
// lazily on first use (one creation however many clients race for it), wakes stopped
// ones, counts their sessions, and stops, resets and destroys them, recording every
// step in the catalog so that reconcile can repair a crash at start-up.
//
// A Manager ties together the catalog (branches/catalog), the overlay mounts
// (branches/overlay), a Runtime that runs Postgres (branches/runtime) and the seed
// builder (branches/seed). It knows nothing of the wire protocol: the proxy asks it
// for a Lease on a route and dials the backend through it.
//
// At start a Manager registers the state directory as a node of its catalog and
// renews the registration every NodeTTL/3 (node.go); a branch whose catalog row
// is no longer this node's is stopped locally and refused (fence.go).
package branches
