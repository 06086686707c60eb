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
package main
