package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
	"github.com/spf13/cobra"
)

func newCluster() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Make the cluster CA and the certificates by which fronts and nodes trust each other"}
	cmd.AddCommand(newClusterInit(), newClusterIssue())
	return cmd
}

func newClusterInit() *cobra.Command {
	var dir string
	var opt cluster.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "init --dir DIR [--lifetime D] [--json]",
		Short: "Make the cluster CA in DIR: ca.crt for every front and node, ca.key to sign members",
		Long: "Make a cluster CA (ECDSA P-256) in DIR, created with mode 0700 if missing:\n" +
			"DIR/ca.key (mode 0600), which signs members with cluster issue and stays\n" +
			"where the certificates are made, and DIR/ca.crt, which every front and node\n" +
			"gets. A DIR that has a CA is refused (exit 4): its members trust that one.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ca, err := cluster.Init(dir, opt)
			if errors.Is(err, cluster.ErrInvalid) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSONTo(out, certJSON(ca))
			}
			fmt.Fprintf(out, "made %q in %s, valid until %s\n  %s  give it to every front and node\n  %s  keep it here, mode 0600: it signs members\n  sha256 %s\n",
				ca.Name, dir, day(ca.NotAfter), ca.CertFile, ca.KeyFile, ca.Fingerprint)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the CA's files")
	durationVar(cmd.Flags(), &opt.Lifetime, "lifetime", cluster.DefaultCALifetime, "how long the CA is valid")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("dir")
	return cmd
}

func newClusterIssue() *cobra.Command {
	var dir, role string
	var req cluster.Request
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "issue --dir DIR --role front|node --name N [--host H ...] [--lifetime D] [--force] [--json]",
		Short: "Make a front's or node's certificate and key, signed by the cluster CA in DIR",
		Long: "Make the certificate and key of one member, signed by the cluster CA in DIR:\n" +
			"DIR/<role>-<name>.crt and DIR/<role>-<name>.key (mode 0600). Copy them and\n" +
			"DIR/ca.crt to the member. The certificate names the role and name\n" +
			"(URI SAN pgbranch://<role>/<name>), which is what fronts and nodes check, and\n" +
			"the --host names and addresses as SANs. Names are unique per role: a member\n" +
			"that exists is refused (exit 4) unless --force, which replaces it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := cluster.ParseRole(role)
			if err != nil {
				return usageError{err}
			}
			req.Role = r
			issued, err := cluster.Issue(dir, req)
			switch {
			case errors.Is(err, cluster.ErrInvalid):
				return usageError{err}
			case errors.Is(err, cluster.ErrExists):
				return fmt.Errorf("%w; pass --force to replace it", err)
			case err != nil:
				return err
			}
			return printIssued(cmd.OutOrStdout(), issued, asJSON)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the cluster CA (cluster init)")
	cmd.Flags().StringVar(&role, "role", "", "front or node")
	cmd.Flags().StringVar(&req.Name, "name", "", "the member's name (a-z, 0-9, '.', '_', '-'); a front checks a node's")
	cmd.Flags().StringSliceVar(&req.Hosts, "host", nil, "DNS name or IP address of the member, as a SAN (repeatable)")
	durationVar(cmd.Flags(), &req.Lifetime, "lifetime", cluster.DefaultMemberLifetime, "how long the certificate is valid (at most until the CA expires)")
	cmd.Flags().BoolVar(&req.Force, "force", false, "replace a member of the same role and name")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	for _, f := range []string{"dir", "role", "name"} {
		cmd.MarkFlagRequired(f)
	}
	return cmd
}

func printIssued(out io.Writer, m cluster.Issued, asJSON bool) error {
	if asJSON {
		return printJSONTo(out, certJSON(m))
	}
	hosts := "no hosts"
	if len(m.Hosts) > 0 {
		hosts = "hosts " + strings.Join(m.Hosts, ", ")
	}
	_, err := fmt.Fprintf(out, "issued %s %q (%s), valid until %s\n  %s\n  %s  mode 0600\n  %s  the cluster CA\n  sha256 %s\n",
		m.Role, m.Name, hosts, day(m.NotAfter), m.CertFile, m.KeyFile, m.CAFile, m.Fingerprint)
	return err
}

// clusterCert is a certificate cluster init or issue wrote, as --json prints it.
type clusterCert struct {
	Role      string    `json:"role,omitempty"`
	Name      string    `json:"name"`
	Hosts     []string  `json:"hosts,omitempty"`
	CACert    string    `json:"ca_cert"`
	Cert      string    `json:"cert"`
	Key       string    `json:"key"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	SHA256    string    `json:"sha256"`
}

func certJSON(m cluster.Issued) clusterCert {
	return clusterCert{Role: string(m.Role), Name: m.Name, Hosts: m.Hosts, CACert: m.CAFile, Cert: m.CertFile,
		Key: m.KeyFile, NotBefore: m.NotBefore, NotAfter: m.NotAfter, SHA256: m.Fingerprint}
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }
