package main

import (
	"fmt"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// target is what a client needs to reach one branch through the proxy.
type target struct {
	Host     string
	Port     int
	User     string
	Password string
	Database string // the database inside the branch
	Branch   string
	Source   string // set when the database name alone would be ambiguous
}

// dbname is the startup database the proxy routes: DB@BRANCH.
func (t target) dbname() string { return t.Database + "@" + t.Branch }

// options is the startup options value, or "".
func (t target) options() string {
	if t.Source == "" {
		return ""
	}
	return "-c pgbranch.source=" + t.Source
}

// libpq is the keyword/value form: host=H port=P user=U dbname=DB@BRANCH.
func (t target) libpq() string {
	parts := []string{"host=" + router.QuoteConnValue(t.Host), "port=" + strconv.Itoa(t.Port), "user=" + router.QuoteConnValue(t.User)}
	if t.Password != "" {
		parts = append(parts, "password="+router.QuoteConnValue(t.Password))
	}
	parts = append(parts, "dbname="+router.QuoteConnValue(t.dbname()))
	if o := t.options(); o != "" {
		parts = append(parts, "options="+router.QuoteConnValue(o))
	}
	return strings.Join(parts, " ")
}

// url is the URL form, with the @ of DB@BRANCH written %40.
func (t target) url() string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(t.Host, strconv.Itoa(t.Port)), User: url.User(t.User)}
	if t.Password != "" {
		u.User = url.UserPassword(t.User, t.Password)
	}
	u.RawPath = "/" + pathEscape(t.dbname())
	u.Path = "/" + t.dbname()
	if o := t.options(); o != "" {
		u.RawQuery = "options=" + queryEscape(o)
	}
	return u.String()
}

// jdbc is the PostgreSQL JDBC driver's form; the driver URL-decodes the database.
func (t target) jdbc() string {
	q := "user=" + queryEscape(t.User)
	if t.Password != "" {
		q += "&password=" + queryEscape(t.Password)
	}
	if o := t.options(); o != "" {
		q += "&options=" + queryEscape(o)
	}
	return fmt.Sprintf("jdbc:postgresql://%s/%s?%s", net.JoinHostPort(t.Host, strconv.Itoa(t.Port)), pathEscape(t.dbname()), q)
}

// env is the libpq environment, one NAME=VALUE a line, plus DATABASE_URL.
func (t target) env() []string {
	out := []string{"PGHOST=" + t.Host, "PGPORT=" + strconv.Itoa(t.Port), "PGUSER=" + t.User, "PGDATABASE=" + t.dbname()}
	if t.Password != "" {
		out = append(out, "PGPASSWORD="+t.Password)
	}
	if t.Source != "" {
		// The switch and its value together, no space: a shell that sources
		// these lines reads the value whole.
		out = append(out, "PGOPTIONS=-c"+router.OptSource+"="+t.Source)
	}
	return append(out, "DATABASE_URL="+t.url())
}

// pathEscape escapes a path segment, '@' included (url.PathEscape leaves it).
func pathEscape(s string) string {
	return strings.ReplaceAll(url.PathEscape(s), "@", "%40")
}

// queryEscape escapes a query value with %20 for spaces, which every driver decodes.
func queryEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
