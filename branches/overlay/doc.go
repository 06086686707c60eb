// Package overlay mounts and unmounts the OverlayFS layers a branch runs on, finds
// mounts left behind under a directory, and measures the bytes a branch's upper
// layer owns.
//
// A branch is an overlay mount with the seed (and, for a branch of a branch, the
// parent's frozen layers) as read-only lower directories, a private upper and work
// directory, and the merged directory used as the branch's PGDATA. Functions here are
// stateless and safe for concurrent use on different mount points.
package overlay
