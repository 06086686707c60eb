package branches

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// ErrNotBound: the catalog is not the state directory's (see bindCatalog).
var ErrNotBound = errors.New("the catalog does not belong to this state directory")

// StateIDFile is where a state directory keeps its id, the one its catalog holds
// too (catalog.Catalog.Bind).
func StateIDFile(stateDir string) string { return filepath.Join(stateDir, "state-id") }

// ReadStateID returns the state directory's id, or "" if it has none yet.
func ReadStateID(stateDir string) (string, error) {
	b, err := os.ReadFile(StateIDFile(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the state id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// WriteStateID records the state directory's id, replacing the file atomically.
func WriteStateID(stateDir, id string) error {
	path := StateIDFile(stateDir)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the state id: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("write the state id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the state id: %w", err)
	}
	return syncFile(stateDir)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// NewStateID returns a new random state id.
func NewStateID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// HoldsData reports whether the state directory holds any branch, seed or fork
// layer: what a server reconciling it against the wrong catalog would remove.
func HoldsData(stateDir string) (bool, error) {
	for _, d := range []string{"branches", "seeds", "layers"} {
		entries, err := os.ReadDir(filepath.Join(stateDir, d))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		if len(entries) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// bindCatalog checks that cat is the state directory's catalog before anything
// is reconciled: reconcile removes every directory that has no row, so a server
// started with a mistyped or new --catalog over a state directory in use would
// otherwise delete every branch. The two share an id, written into both when the
// pair is first used. A state directory and a catalog from before the id existed
// (neither has one) are bound when the catalog has records or the directory has
// no data; an empty catalog over a directory with data, or ids that differ, are
// refused. where names the catalog in errors.
func bindCatalog(ctx context.Context, cat *catalog.Catalog, stateDir, where string) error {
	fileID, err := ReadStateID(stateDir)
	if err != nil {
		return err
	}
	catID, err := cat.StateID(ctx)
	if err != nil {
		return err
	}
	if fileID != "" && fileID == catID {
		return nil
	}
	if catID == catalog.ClusterBinding {
		return fmt.Errorf("%w: the catalog %s is shared by the nodes of a cluster; serve --role node on it, "+
			"or give this server a catalog of its own", ErrNotBound, where)
	}
	if strings.HasPrefix(catID, catalog.RetiredPrefix) {
		return fmt.Errorf("%w: the catalog %s was copied to another by catalog migrate, and the state directory %s "+
			"belongs to the copy now; serve with the new catalog (--catalog), or copy the rows back with "+
			"`pgbranchproxy catalog migrate --from NEW --to OLD --force`", ErrNotBound, where, stateDir)
	}
	hasData, err := HoldsData(stateDir)
	if err != nil {
		return fmt.Errorf("look for branches and seeds in %s: %w", stateDir, err)
	}
	hasRecords, err := cat.HasRecords(ctx)
	if err != nil {
		return err
	}
	switch {
	case fileID != "" && catID != "":
		return fmt.Errorf("%w: the state directory %s has id %s, the catalog %s belongs to the state directory of id %s; "+
			"serve with the catalog this state directory was used with, or give the catalog a state directory of its own",
			ErrNotBound, stateDir, fileID, where, catID)
	case hasData && !hasRecords:
		return fmt.Errorf("%w: the catalog %s is empty but the state directory %s holds branches or seeds; "+
			"serve with the catalog this state directory was used with (a typo in --catalog?), "+
			"or move its rows first with `pgbranchproxy catalog migrate --from OLD --to NEW`",
			ErrNotBound, where, stateDir)
	case catID != "" && (hasData || hasRecords):
		return fmt.Errorf("%w: the catalog %s belongs to the state directory of id %s, and %s has no id (%s is missing); "+
			"if this is that state directory, write %s into that file",
			ErrNotBound, where, catID, stateDir, StateIDFile(stateDir), catID)
	case fileID != "" && hasRecords:
		return fmt.Errorf("%w: the state directory %s has id %s, and the catalog %s has records of another (it has no id); "+
			"serve with the catalog this state directory was used with",
			ErrNotBound, stateDir, fileID, where)
	case fileID == "" && catID == "" && hasData && hasRecords:
		// A pair from before the id: adopt it only if the catalog knows one of the
		// directory's branches, so that an old catalog of another state directory
		// is not taken for this one's.
		if ok, err := sharesBranches(ctx, cat, stateDir); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("%w: the catalog %s records none of the branches in %s; serve with the catalog this "+
					"state directory was used with", ErrNotBound, where, stateDir)
			}
			return err
		}
	}
	// A new pair, a pair from before the id, or one whose first binding was
	// interrupted: the catalog is bound first, then the file names it.
	id := fileID
	if id == "" {
		id = catID
	}
	if id == "" {
		id = NewStateID()
	}
	bound, err := cat.Bind(ctx, id)
	if err != nil {
		return err
	}
	if bound != id {
		return fmt.Errorf("%w: the catalog %s was bound to the state directory of id %s meanwhile", ErrNotBound, where, bound)
	}
	// The catalog's rows are this state directory's now, whichever node id wrote
	// them: the node registering next (registerNode) adopts them.
	if err := cat.ClearOwners(ctx); err != nil {
		return err
	}
	return WriteStateID(stateDir, id)
}

// sharesBranches reports whether some branch directory of the state directory has
// its row in the catalog (or the directory holds no branch directory at all).
func sharesBranches(ctx context.Context, cat *catalog.Catalog, stateDir string) (bool, error) {
	entries, err := os.ReadDir(filepath.Join(stateDir, "branches"))
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	recs, err := cat.Branches(ctx)
	if err != nil {
		return false, err
	}
	ids := make(map[string]bool, len(recs))
	for _, r := range recs {
		ids[strconv.FormatInt(r.ID, 10)] = true
	}
	for _, e := range entries {
		if ids[e.Name()] {
			return true, nil
		}
	}
	return false, nil
}
