package main

import (
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/prometheus/client_golang/prometheus"
)

var refusedDesc = prometheus.NewDesc("pgbranch_proxy_refused_total",
	"Client connections refused with an error, by the SQLSTATE the client was told "+
		"(53300 too many, 28P01 a failed login, 57P03 not now, ...; other: a code not among them).",
	[]string{"sqlstate"}, nil)

// refusedCollector exports the proxy's refused connections by SQLSTATE, every
// code the proxy counts by present from the start (at 0) so that rates over it
// need no absent series.
type refusedCollector struct{ st *proxy.Stats }

func (c refusedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- refusedDesc }

func (c refusedCollector) Collect(ch chan<- prometheus.Metric) {
	for code, n := range c.st.RefusedBy() {
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(n), code)
	}
}
