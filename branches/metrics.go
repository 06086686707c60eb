package branches

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the manager's Prometheus collectors. Register them with Collectors.
// A nil *Metrics records nothing. Safe for concurrent use.
type Metrics struct {
	actions   *prometheus.CounterVec   // action, reason
	durations *prometheus.HistogramVec // action
	byState   *prometheus.GaugeVec     // state
	sessions  prometheus.Gauge
	owned     prometheus.Gauge
	reapPass  prometheus.Histogram
	pool      *prometheus.CounterVec // event: claim, miss
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgbranch_branch_actions_total",
			Help: "Branch lifecycle actions (create, wake, stop, reset, destroy, evict) by reason.",
		}, []string{"action", "reason"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pgbranch_branch_action_seconds",
			Help:    actionSecondsHelp(),
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"action"}),
		byState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pgbranch_branches",
			Help: "Branches by state.",
		}, []string{"state"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgbranch_sessions", Help: "Open client sessions on branches."}),
		owned:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgbranch_owned_bytes", Help: "Bytes all branches own, as of the last reaper pass."}),
		pool: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgbranch_pool_events_total",
			Help: "Warm pool claims (a new branch served by a pooled one) and misses (none was ready).",
		}, []string{"event"}),
		reapPass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgbranch_reaper_pass_seconds",
			Help:    "Duration of one reaper pass.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5},
		}),
	}
}

// timedActions are the actions pgbranch_branch_action_seconds times (its action
// label), each with what it times.
func timedActions() [][2]string {
	return [][2]string{
		{"create", "a branch created for its first session"},
		{"wake", "a stopped branch started for a session"},
		{"reset", "a branch reset, on connect, by the reaper or by an administrator"},
		{"stop", "a branch stopped by an administrator"},
		{"destroy", "a branch destroyed by an administrator"},
		{"pool_refill", "a warm pool member created"},
		{"seed_copy", "a seed copied from another node"},
	}
}

// actionSecondsHelp is pgbranch_branch_action_seconds' help: every action it times.
func actionSecondsHelp() string {
	var parts []string
	for _, a := range timedActions() {
		parts = append(parts, a[0]+" ("+a[1]+")")
	}
	return "How long branch actions took, by action: " + strings.Join(parts, ", ") + "."
}

// Collectors lists the collectors to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.actions, m.durations, m.byState, m.sessions, m.owned, m.reapPass, m.pool}
}

func (m *Metrics) action(action, reason string) {
	if m != nil {
		m.actions.WithLabelValues(action, reason).Inc()
	}
}

func (m *Metrics) poolEvent(event string) {
	if m != nil {
		m.pool.WithLabelValues(event).Inc()
	}
}

func (m *Metrics) took(action string, d time.Duration) {
	if m != nil {
		m.durations.WithLabelValues(action).Observe(d.Seconds())
	}
}
