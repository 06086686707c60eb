package integration

// failpointsEnv is the variable serve reads its failpoint rules from.
const failpointsEnv = "PGBRANCH_FAILPOINTS"
