package catalog_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// The catalog holds password verifiers: Open must refuse a catalog file it cannot
// make private rather than go on with it readable by others. An immutable file
// (chattr +i, root only) refuses both the read-write open and the chmod.
func TestOpenRefusesFileItCannotMakePrivate(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root for chattr +i")
	}
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := catalog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() })
	c, err = catalog.Open(path)
	if err == nil {
		c.Close()
		st, _ := os.Stat(path)
		t.Fatalf("Open of a catalog it cannot make private succeeded; mode %v", st.Mode().Perm())
	}
	t.Logf("Open: %v", err)
}
