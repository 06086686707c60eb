package branches

import "time"

// poolPace follows how fast a source's pool is claimed during bursts of claims and
// how long a new member takes to be ready, so that a refill can wait out a burst
// without letting the pool run dry. Its fields are guarded by Manager.mu.
type poolPace struct {
	claimGap time.Duration // moving average of the time between claims within a burst
	fillTook time.Duration // moving average of a member's creation, sessions opened ahead included
}

// claimed records a claim gap after the previous one. Only gaps within a burst
// (shorter than claimRefillDelay) count: the reserve is for bursts.
func (p *poolPace) claimed(gap time.Duration) {
	if gap <= 0 || gap >= claimRefillDelay {
		return
	}
	p.claimGap = average(p.claimGap, gap)
}

// filled records how long a new member took to be ready.
func (p *poolPace) filled(took time.Duration) { p.fillTook = average(p.fillTook, took) }

// reserve is how many of want members a pool keeps before it refills during a
// burst: what the burst claims while one member is made, plus one, so that the
// first new member is ready about when the pool would run dry. The refill looks at
// the pool once a claimRefillDelay during a burst, so the claims of one such delay
// count too. (Looking after every claim instead started servers in the middle of
// 20 claims at once, and their p95 went from 17 to 37 ms.) Never more than half the
// pool, what it kept before its pace was known: a burst that a pool cannot outlast
// (20 claims at once) gains nothing from server starts beside its first queries.
func (p *poolPace) reserve(want int) int {
	half := (want - 1) / 2
	if p.claimGap <= 0 || p.fillTook <= 0 {
		return half
	}
	return min(half, int((p.fillTook+claimRefillDelay)/p.claimGap)+1)
}

// average moves avg a quarter of the way to v (to v itself when avg is unset).
func average(avg, v time.Duration) time.Duration {
	if avg <= 0 {
		return v
	}
	return avg + (v-avg)/4
}
