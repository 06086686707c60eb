package branches

import (
	"cmp"
	"slices"
	"time"
)

// Quota policies: what happens to a branch that owns more than its quota.
const (
	QuotaReset  = "reset"  // refuse new sessions, reset it when its last session ends
	QuotaRefuse = "refuse" // refuse new sessions until someone resets or destroys it
)

// Policy is the lifecycle configuration the reaper applies. The zero value never stops,
// destroys or resets anything.
type Policy struct {
	IdleStop    time.Duration // stop a running branch with no sessions for this long; 0: never
	TTL         time.Duration // destroy a branch with no session for this long; 0: never (per-branch TTL wins)
	MaxAge      time.Duration // destroy a branch this old once it has no sessions; 0: never
	Quota       int64         // bytes a branch may own; 0: no limit (per-branch quota wins)
	QuotaPolicy string        // QuotaReset (default) or QuotaRefuse
	DiskBudget  int64         // bytes all branches may own together; 0: no limit
	DiskReserve int64         // kept free below the budget
	MaxRunning  int           // branch servers running at once; 0: no limit
	HistoryKeep time.Duration // transitions older than this are deleted; 0: kept
	AuditKeep   time.Duration // audit entries older than this are deleted; 0: kept
}

// view is what the planner knows of one branch.
type view struct {
	k          key
	running    bool
	sessions   int
	busy       bool // an operation is in flight
	pooled     bool // a warm pool member: only the budget can take it, first of all
	ephemeral  bool
	ttl        time.Duration
	quota      int64
	owned      int64
	createdAt  time.Time
	lastUsedAt time.Time
}

// actionKind is what the reaper does to a branch.
type actionKind string

const (
	actStop    actionKind = "stop"
	actReset   actionKind = "reset"
	actDestroy actionKind = "destroy"
)

// action is one planned step, with its reason for the log and the catalog.
type action struct {
	k      key
	kind   actionKind
	reason string
	code   string // a short, stable reason for metrics
	evict  bool   // done to fit the disk budget
}

// plan decides the reaper's actions for one pass. It is pure: the same views at the
// same time give the same plan. overQuota lists the branches that must refuse new
// sessions.
func plan(p Policy, now time.Time, views []view) (acts []action, overQuota map[key]bool) {
	overQuota = map[key]bool{}
	done := map[key]bool{}
	add := func(v view, kind actionKind, code, reason string, evict bool) {
		acts = append(acts, action{k: v.k, kind: kind, code: code, reason: reason, evict: evict})
		done[v.k] = true
	}
	var total int64
	for _, v := range views {
		total += v.owned
		quota := cmp.Or(v.quota, p.Quota)
		if quota > 0 && v.owned > quota {
			overQuota[v.k] = true
		}
		if v.busy || v.sessions > 0 || v.pooled {
			continue
		}
		idle := now.Sub(v.lastUsedAt)
		ttl := cmp.Or(v.ttl, p.TTL)
		switch {
		case v.ephemeral:
			add(v, actDestroy, codeEnded, endedReason, false)
		case ttl > 0 && idle >= ttl:
			add(v, actDestroy, "ttl", "ttl: no session for "+ttl.String(), false)
		case p.MaxAge > 0 && now.Sub(v.createdAt) >= p.MaxAge:
			add(v, actDestroy, "max_age", "max age "+p.MaxAge.String()+" reached", false)
		case overQuota[v.k] && p.QuotaPolicy != QuotaRefuse:
			add(v, actReset, "quota", "over its disk quota", false)
		case v.running && p.IdleStop > 0 && idle >= p.IdleStop:
			add(v, actStop, "idle", "idle for "+p.IdleStop.String(), false)
		}
	}
	if p.DiskBudget <= 0 || total+p.DiskReserve <= p.DiskBudget {
		return acts, overQuota
	}
	// Over the budget: count what the actions above free, then evict idle branches,
	// least recently used first: warm pool members, ephemeral, then expired-looking
	// (idle past their idle-stop), then any whose quota policy allows a reset.
	for _, a := range acts {
		if a.kind != actStop {
			total -= ownedOf(views, a.k)
		}
	}
	groups := [4][]view{}
	for _, v := range views {
		if done[v.k] || v.busy || v.sessions > 0 || v.owned == 0 {
			continue
		}
		switch {
		case v.pooled:
			groups[0] = append(groups[0], v)
		case v.ephemeral:
			groups[1] = append(groups[1], v)
		case p.IdleStop > 0 && now.Sub(v.lastUsedAt) >= p.IdleStop:
			groups[2] = append(groups[2], v)
		case p.QuotaPolicy != QuotaRefuse:
			groups[3] = append(groups[3], v)
		}
	}
	for i, g := range groups {
		slices.SortFunc(g, func(a, b view) int { return a.lastUsedAt.Compare(b.lastUsedAt) })
		for _, v := range g {
			if total+p.DiskReserve <= p.DiskBudget {
				return acts, overQuota
			}
			kind, reason := actReset, "disk budget: least recently used"
			switch i {
			case 0:
				kind, reason = actDestroy, "disk budget: warm pool member"
			case 1:
				kind, reason = actDestroy, "disk budget: ephemeral"
			}
			add(v, kind, "disk_budget", reason, true)
			total -= v.owned
		}
	}
	return acts, overQuota
}

func ownedOf(views []view, k key) int64 {
	for _, v := range views {
		if v.k == k {
			return v.owned
		}
	}
	return 0
}
