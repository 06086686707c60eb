package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newMetricsHandler serves the branch manager's and the proxy's metrics from a
// registry of their own (no global registry).
func newMetricsHandler(m *branches.Metrics, st *proxy.Stats, rs *proxy.RelayStats) http.Handler {
	reg := prometheus.NewRegistry()
	if m != nil { // a front runs no branches
		reg.MustRegister(m.Collectors()...)
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgbranch_proxy_connections_total", Help: "Client connections accepted."},
			func() float64 { return float64(st.Accepted.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgbranch_proxy_connections_active", Help: "Client connections open now."},
			func() float64 { return float64(st.Active.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgbranch_proxy_cancel_requests_total", Help: "Cancel requests received."},
			func() float64 { return float64(st.Cancels.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgbranch_proxy_server_sessions_opened_total", Help: "Server sessions started for clients (a backend fork each)."},
			func() float64 { return float64(st.ServersOpened.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgbranch_proxy_server_sessions_reused_total", Help: "Clients served by a parked server session, without a fork."},
			func() float64 { return float64(st.ServersReused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgbranch_proxy_node_connections_kept_total", Help: "Sessions through a front whose connection to their node was kept for a later session."},
			func() float64 { return float64(st.ConnsKept.Load()) }),
	)
	reg.MustRegister(relayCollector{rs}, refusedCollector{st})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// serveMetrics serves h at /metrics and a liveness answer at /healthz on addr
// until the returned stop is called.
func serveMetrics(addr string, h http.Handler) (stop func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv.Close, nil
}
