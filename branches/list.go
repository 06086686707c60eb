package branches

import (
	"slices"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// Info describes one branch, as `branch ls --json` prints it.
type Info struct {
	Name       string `json:"name"`
	Source     string `json:"source"`
	State      string `json:"state"`
	CowMode    string `json:"cow_mode"`
	OwnedBytes int64  `json:"owned_bytes"`
	Sessions   int    `json:"sessions"`
	// IdleServers counts server sessions parked for reuse; they are not sessions.
	IdleServers int    `json:"idle_servers"`
	Parent      string `json:"parent,omitempty"`
	// ParentGone: the branch Parent names was destroyed since the fork (a branch
	// of that name made later is another).
	ParentGone bool       `json:"parent_gone,omitempty"`
	Ephemeral  bool       `json:"ephemeral"`
	TTL        string     `json:"ttl,omitempty"`
	Quota      int64      `json:"quota,omitempty"`
	OverQuota  bool       `json:"over_quota,omitempty"`
	PID        int        `json:"pid,omitempty"`
	CreateMS   int64      `json:"create_ms"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt time.Time  `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	Node       string     `json:"node,omitempty"` // the node that owns the branch in the catalog
	// ServerView is, under a container runtime, the image and limits the
	// branch's server starts with.
	ServerView
}

// List describes every branch, by source and name. Owned bytes are measured now.
// Warm pool members are left out; ListAll includes them.
func (m *Manager) List() []Info { return m.list(false) }

// ListAll describes every branch and every warm pool member (state "pooled").
func (m *Manager) ListAll() []Info { return m.list(true) }

func (m *Manager) list(all bool) []Info {
	nodeLost := m.cat.NodeLost()
	m.mu.Lock()
	out := make([]Info, 0, len(m.branches))
	ids := make([]int64, 0, len(m.branches))
	for _, b := range m.branches {
		r := b.rec
		if r.Pooled && !all {
			continue
		}
		info := Info{Name: r.Name, Source: r.Source, State: string(r.State), CowMode: r.CowMode, OwnedBytes: r.OwnedBytes,
			Sessions: b.sessions, IdleServers: b.idleCount, Parent: r.Parent, Ephemeral: r.Ephemeral, PID: r.PID, CreateMS: r.CreateMS,
			Error: r.Error, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, OverQuota: b.overQuota,
			ParentGone: m.parentGoneLocked(r)}
		info.Quota = r.Quota
		if info.Quota == 0 {
			info.Quota = m.cfg.Policy.Quota
		}
		if b.op != nil && b.op.what == "create" {
			info.State = "creating"
		}
		if r.Pooled && r.State == "running" && b.op == nil {
			info.State = "pooled"
		}
		info.Node = r.NodeID
		switch {
		case b.fenced && nodeLost:
			info.State = "fenced"
			info.Error = "this node lost its registration in the catalog; this server stopped the branch's server and serves it no more (restart serve)"
		case b.fenced:
			info.State = "fenced"
			info.Error = "the catalog gave the branch to another registration of this node; this server no longer serves it (restart serve)"
		case r.State == catalog.Lost && info.Error == "":
			info.Error = "its node was declared dead (no heartbeat for --node-dead-after); only destroying it is possible"
		}
		ttl := r.TTL
		if ttl == 0 {
			ttl = m.cfg.Policy.TTL
		}
		if ttl > 0 {
			info.TTL = ttl.String()
			if b.sessions == 0 {
				exp := r.LastUsedAt.Add(ttl)
				info.ExpiresAt = &exp
			}
		}
		if p := m.cfg.Policy.MaxAge; p > 0 {
			if exp := r.CreatedAt.Add(p); info.ExpiresAt == nil || exp.Before(*info.ExpiresAt) {
				info.ExpiresAt = &exp
			}
		}
		out = append(out, info)
		ids = append(ids, r.ID)
	}
	m.mu.Unlock()
	views, hasViews := m.serverViews()
	for i := range out {
		if hasViews {
			out[i].ServerView = views.branch(out[i].Source, out[i].Name, out[i].CreatedAt)
		}
		if ids[i] == 0 {
			continue
		}
		if n, err := m.usage.Owned(m.layoutOf(ids[i]).upper); err == nil {
			out[i].OwnedBytes = n
		}
	}
	slices.SortFunc(out, func(a, b Info) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// parentGoneLocked reports whether the branch r was forked from has been destroyed:
// the branch of its parent's name is another (or none, or an ephemeral one whose
// last session has ended), or, for a row from before
// parents' ids were recorded, there is no branch of that name. m.mu is held.
func (m *Manager) parentGoneLocked(r catalog.Branch) bool {
	if r.Parent == "" {
		return false
	}
	p := m.branches[key{r.Source, r.Parent}]
	if p == nil || p.ended() {
		return true
	}
	return r.ParentID != 0 && p.rec.ID != r.ParentID
}
