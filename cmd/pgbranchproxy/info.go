package main

import (
	"net/http"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
)

func newInfo(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show how the running server runs branches (copy-up mode, lazyrw) and relays sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient(g)
			var info struct {
				branches.ServerInfo
				Role string `json:"role"`
			}
			if err := c.call(cmd.Context(), http.MethodGet, "/v1/info", nil, &info); err != nil {
				return err
			}
			out := struct {
				branches.ServerInfo
				Role  string     `json:"role,omitempty"` // the caller's: admin on the socket, else its token's
				Relay *relayInfo `json:"relay,omitempty"`
			}{ServerInfo: info.ServerInfo, Role: info.Role}
			// The relay's figures are in /metrics, which role ci may not read: asking
			// would only leave a refusal in the audit log.
			if info.Role != admin.RoleCI {
				if resp, err := c.do(cmd.Context(), http.MethodGet, "/metrics", nil); err == nil {
					out.Relay = readRelayInfo(resp)
				}
			}
			return printJSONTo(cmd.OutOrStdout(), out)
		},
	}
}

// relayInfo is what the proxy's relay metrics say: which relay sessions use, and
// why sessions fell back from the kernel relay.
type relayInfo struct {
	KernelLoaded  bool             `json:"kernel_loaded"`
	KernelSockets int64            `json:"kernel_sockets"`
	Active        map[string]int64 `json:"active"`
	Total         map[string]int64 `json:"total"`
	Fallbacks     map[string]int64 `json:"fallbacks"`
}

func readRelayInfo(resp *http.Response) *relayInfo {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	ri := &relayInfo{Active: map[string]int64{}, Total: map[string]int64{}, Fallbacks: map[string]int64{}}
	byLabel := func(name string, into map[string]int64) {
		f := fams[name]
		if f == nil {
			return
		}
		for _, m := range f.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if l := m.GetLabel(); len(l) > 0 {
				into[l[0].GetValue()] = int64(v)
			}
		}
	}
	byLabel("pgbranch_proxy_relay_sessions_active", ri.Active)
	byLabel("pgbranch_proxy_relay_sessions_total", ri.Total)
	byLabel("pgbranch_proxy_relay_fallbacks_total", ri.Fallbacks)
	if f := fams["pgbranch_proxy_relay_kernel_loaded"]; f != nil && len(f.GetMetric()) > 0 {
		ri.KernelLoaded = f.GetMetric()[0].GetGauge().GetValue() == 1
	}
	if f := fams["pgbranch_proxy_relay_kernel_sockets"]; f != nil && len(f.GetMetric()) > 0 {
		ri.KernelSockets = int64(f.GetMetric()[0].GetGauge().GetValue())
	}
	return ri
}
