package overlay

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Layout names the directories of one overlay mount.
type Layout struct {
	Lower  []string // read-only layers, top first
	Upper  string
	Work   string
	Merged string
}

// ValidPath reports whether p can appear in overlay mount options: the option string
// is split on ',' and lowerdir on ':', and neither can be escaped portably.
func ValidPath(p string) error {
	if strings.ContainsAny(p, ",:\x00\n") {
		return fmt.Errorf("path %q contains one of , : NUL or newline, which OverlayFS mount options cannot carry", p)
	}
	return nil
}

// Mount mounts l.Merged as an overlay of l.Lower under l.Upper, creating Upper, Work
// and Merged if needed. Upper's root is created with uid/gid as owner and mode 0700,
// which the merged directory shows, so Postgres accepts it as a data directory.
func Mount(l Layout, uid, gid int) error {
	if len(l.Lower) == 0 {
		return errors.New("overlay mount needs at least one lower layer")
	}
	for _, p := range append(append([]string{}, l.Lower...), l.Upper, l.Work, l.Merged) {
		if err := ValidPath(p); err != nil {
			return err
		}
	}
	for _, d := range []string{l.Upper, l.Work, l.Merged} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.Chown(l.Upper, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(l.Upper, 0o700); err != nil {
		return err
	}
	opts := "lowerdir=" + strings.Join(l.Lower, ":") + ",upperdir=" + l.Upper + ",workdir=" + l.Work
	if err := unix.Mount("overlay", l.Merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", l.Merged, err)
	}
	return nil
}

// Unmount unmounts target, retrying for a few seconds while it is busy (a process
// that just exited may still hold it). Not mounted is not an error.
func Unmount(target string) error {
	deadline := time.Now().Add(5 * time.Second)
	for delay := 5 * time.Millisecond; ; delay *= 2 {
		err := unix.Unmount(target, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline):
			time.Sleep(min(delay, 200*time.Millisecond))
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
}

// MountsUnder lists the mount points at or below dir, deepest first, from
// /proc/self/mountinfo.
func MountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, prefix) {
			out = append(out, mp)
		}
	}
	// Deepest first, so nested mounts come off before their parents.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, sc.Err()
}

// MountsBelow lists the mount points strictly below dir, deepest first: those
// under a state directory that is itself a mount point (a volume, a filesystem of
// its own) without that one.
func MountsBelow(dir string) ([]string, error) {
	all, err := MountsUnder(dir)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, mp := range all {
		if mp != dir {
			out = append(out, mp)
		}
	}
	return out, nil
}

// IsMounted reports whether target is a mount point.
func IsMounted(target string) (bool, error) {
	target = filepath.Clean(target)
	mps, err := MountsUnder(target)
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == target {
			return true, nil
		}
	}
	return false, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space and so on) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
