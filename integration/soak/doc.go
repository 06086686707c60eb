// Command soak runs the real pgbranchproxy binary for a long time under a mixed load
// and fails on leaks, lost writes and errors no client provoked (make soak).
//
// It starts serve as root on a private state directory with a reaper every second
// and a short idle stop, seeds one source, and drives it through the proxy with pgx:
// 1,000 clients spread over 50 branches, each client checking that every row it ever
// committed is still there at the start of each of its sessions; a rotating fifth of
// the branches goes unused for a while, so the reaper stops them and the next session
// wakes them; branches are reset (and their clients' expectations cleared); ephemeral
// branches are created and destroyed. Every interval it samples serve's open file
// descriptors, goroutines and RSS, the mounts and postmasters under the state
// directory, and the catalog's size, and it fails on growth that does not level off
// (see growth.go).
//
// With --roles (make soak-roles) it runs the same load against fronts and nodes: it
// starts a Postgres catalog server (branches/catalog/catalogtest), two nodes (serve
// --role node, each on its own state directory) and two fronts (serve --role front),
// seeds the source through the first node, waits until the other holds a copy of
// the seed, and sends each session to a front chosen at random, as a TCP load
// balancer would; resets go to the admin API of the node that holds the branch. Each
// process's descriptors, goroutines and RSS are judged on their own. At the end,
// in both modes, every branch must be on exactly one node, its catalog row naming
// that node, and every branch directory on a node's disk must belong to one of its
// rows; once everything is stopped no mount or postmaster may be left.
package main
