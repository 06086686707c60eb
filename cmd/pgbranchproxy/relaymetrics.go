package main

import (
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	relayActiveDesc = prometheus.NewDesc("pgbranch_proxy_relay_sessions_active",
		"Sessions each relay (kernel, epoll, goroutine) carries now.", []string{"relay"}, nil)
	relayTotalDesc = prometheus.NewDesc("pgbranch_proxy_relay_sessions_total",
		"Sessions each relay has carried.", []string{"relay"}, nil)
	relayFallbackDesc = prometheus.NewDesc("pgbranch_proxy_relay_fallbacks_total",
		"Sessions not carried (or no longer) by the kernel relay, by reason.", []string{"reason"}, nil)
	relaySocketsDesc = prometheus.NewDesc("pgbranch_proxy_relay_kernel_sockets",
		"Sockets in the kernel relay's maps now (two a spliced session).", nil, nil)
	relayKernelDesc = prometheus.NewDesc("pgbranch_proxy_relay_kernel_loaded",
		"1 when the kernel relay's BPF programs are loaded.", nil, nil)
)

// relayCollector exports the proxy's relay counters.
type relayCollector struct{ rs *proxy.RelayStats }

func (c relayCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- relayActiveDesc
	ch <- relayTotalDesc
	ch <- relayFallbackDesc
	ch <- relayKernelDesc
	ch <- relaySocketsDesc
}

func (c relayCollector) Collect(ch chan<- prometheus.Metric) {
	for k, v := range c.rs.Active() {
		ch <- prometheus.MustNewConstMetric(relayActiveDesc, prometheus.GaugeValue, float64(v), k)
	}
	for k, v := range c.rs.Total() {
		ch <- prometheus.MustNewConstMetric(relayTotalDesc, prometheus.CounterValue, float64(v), k)
	}
	for k, v := range c.rs.Fallbacks() {
		ch <- prometheus.MustNewConstMetric(relayFallbackDesc, prometheus.CounterValue, float64(v), k)
	}
	loaded := 0.0
	if c.rs.KernelLoaded {
		loaded = 1
	}
	ch <- prometheus.MustNewConstMetric(relayKernelDesc, prometheus.GaugeValue, loaded)
	ch <- prometheus.MustNewConstMetric(relaySocketsDesc, prometheus.GaugeValue, float64(c.rs.KernelSockets()))
}
