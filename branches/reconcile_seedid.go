package branches

import (
	"context"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
)

// baseSeedOf returns the seed generation whose data directory is rec's lowest
// layer, if it is one of seeds (a flattened fork's lowest layer is its own copy).
func (m *Manager) baseSeedOf(rec catalog.Branch, seeds []catalog.Seed) (catalog.Seed, bool) {
	if len(rec.Layers) == 0 {
		return catalog.Seed{}, false
	}
	base := rec.Layers[len(rec.Layers)-1]
	for _, sd := range seeds {
		if sd.Source == rec.Source && (sd.Dir == base || m.seedLayer(sd) == base) {
			return sd, true
		}
	}
	return catalog.Seed{}, false
}

// repairSeedIDs sets the seed generation of each branch made from another to the
// one its layers stand on. Earlier releases recorded the source's newest
// generation when the branch was made, not its parent's, so that once the source
// had been refreshed a restart could remove the generation under the branch
// (and branch diff compared with the wrong one).
func (m *Manager) repairSeedIDs(ctx context.Context, recs []catalog.Branch) error {
	seeds, err := m.cat.Seeds(ctx)
	if err != nil {
		return err
	}
	for i, rec := range recs {
		switch {
		case rec.Parent == "" || !m.reconciles(rec):
			continue
		case rec.State == catalog.Creating || rec.State == catalog.Destroying || rec.State == catalog.Lost:
			continue
		}
		sd, ok := m.baseSeedOf(rec, seeds)
		if !ok || sd.ID == rec.SeedID {
			continue
		}
		m.log.Info("branch stands on another seed generation than recorded", zap.String("source", rec.Source),
			zap.String("branch", rec.Name), zap.Int64("recorded", rec.SeedID), zap.Int64("seed", sd.ID), zap.Int("generation", sd.Generation))
		rec.SeedID = sd.ID
		if err := m.cat.UpdateBranch(ctx, rec, "reconcile: seed generation of its layers"); err != nil {
			m.log.Warn("record the branch's seed generation", zap.String("branch", rec.Name), zap.Error(err))
			continue
		}
		recs[i] = rec
	}
	return nil
}
