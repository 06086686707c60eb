package main

import (
	"fmt"
	"os"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/spf13/cobra"
)

// addBuildFlags adds the flags of source add that shape how seeds are built:
// --from-dump's restore options and --mask.
func addBuildFlags(cmd *cobra.Command, req *branches.SourceRequest, maskFile *string) {
	cmd.Flags().StringVar(&req.DumpPath, "from-dump", "", "restore this pg_dump archive (custom file, directory or tar) with pg_restore into --database")
	cmd.Flags().BoolVar(&req.KeepOwners, "keep-owners", false, "--from-dump: restore owners and privileges (roles it names that are missing are created NOLOGIN) instead of --no-owner --no-privileges")
	cmd.Flags().IntVar(&req.Jobs, "jobs", 0, "--from-dump: pg_restore parallel jobs for custom and directory archives (default: one per CPU)")
	cmd.Flags().StringVar(maskFile, "mask", "", "run this SQL file in --database after loading and before settling; kept with the source and run again on refresh")
}

// checkBuildFlags refuses restore options given without --from-dump, which
// nothing else would read, and a negative --jobs.
func checkBuildFlags(cmd *cobra.Command, req branches.SourceRequest) error {
	if req.DumpPath == "" {
		for _, f := range []string{"keep-owners", "jobs"} {
			if cmd.Flags().Changed(f) {
				return usageErrorf("--%s goes with --from-dump", f)
			}
		}
	}
	if req.Jobs < 0 {
		return usageErrorf("--jobs %d: want 0 (one per CPU) or more", req.Jobs)
	}
	return nil
}

// readMask puts the masking SQL file's content into req: the server keeps the SQL
// itself, so a refresh masks the same way even if the file changes or goes.
func readMask(path string, req *branches.SourceRequest) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--mask: %w", err)
	}
	if len(b) == 0 {
		return fmt.Errorf("--mask: %s is empty", path)
	}
	req.Mask = string(b)
	return nil
}
