package main

import "fmt"

// checkCounts refuses the counts to which 0 (or less) means nothing: the engine
// took them for their defaults in silence, and an operator who wrote 0 meaning
// "none" or "no limit" got 4 creations at once or 32 layers.
func checkCounts(f *serveFlags) error {
	switch {
	case f.maxCreating < 1:
		return fmt.Errorf("--max-creating %d: at least 1 branch creation must be able to run", f.maxCreating)
	case f.maxLayers < 1:
		return fmt.Errorf("--max-layers %d: at least 1 (the seed); 1 flattens every branch of a branch", f.maxLayers)
	}
	return nil
}

// checkFailedLogins refuses --max-failed-logins 0, which the proxy took for its
// default of 20: a negative number is no limit.
func checkFailedLogins(f *serveFlags) error {
	if f.failedLogins == 0 {
		return fmt.Errorf("--max-failed-logins 0: give the failed logins an address may make per minute, or a negative number for no limit")
	}
	return nil
}
