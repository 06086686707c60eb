package overlay

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// MountReadOnly mounts merged as a read-only overlay of lower (top first, at least
// two layers), without an upper layer: the merged view of the layers, with their
// whiteouts and opaque directories applied, that nothing can write to.
func MountReadOnly(lower []string, merged string) error {
	if len(lower) < 2 {
		return errors.New("a read-only overlay mount needs at least two lower layers")
	}
	for _, p := range append(append([]string{}, lower...), merged) {
		if err := ValidPath(p); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(merged, 0o700); err != nil {
		return err
	}
	opts := "lowerdir=" + strings.Join(lower, ":")
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_RDONLY, opts); err != nil {
		return fmt.Errorf("mount read-only overlay on %s: %w", merged, err)
	}
	return nil
}
