package main

import (
	"os"

	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
	"go.uber.org/zap"
)

// failpointsEnv names the variable that turns fault injection on. Only tests set it;
// it is not a flag and appears in no help text.
const failpointsEnv = "PGBRANCH_FAILPOINTS"

// loadFailpoints reads the failpoint rules once, at start-up (nil when unset).
func loadFailpoints(log *zap.Logger) (*failpoint.Set, error) {
	fps, err := failpoint.Parse(os.Getenv(failpointsEnv))
	if err != nil {
		return nil, err
	}
	if fps.Enabled() {
		log.Warn("failpoints enabled: faults will be injected", zap.String("failpoints", fps.String()))
	}
	return fps, nil
}
