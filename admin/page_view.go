package admin

import (
	"cmp"
	"fmt"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"slices"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// pageData is what the page template shows.
type pageData struct {
	Login      bool
	LoginError string
	Flash      string
	Error      string
	Now        time.Time
	Info       branches.ServerInfo
	Sources    []branches.SourceInfo
	Branches   []branchRow
	Sessions   int
	Running    int
	Owned      int64
}

// branchRow is one branch with its connection string.
type branchRow struct {
	branches.Info
	DSN string
}

// fill adds the branches, with their connection strings, and the totals.
func (d *pageData) fill(list []branches.Info, host, port string) {
	dbOf := map[string]string{}
	for _, s := range d.Sources {
		dbOf[s.Name] = cmp.Or(s.Database, mainDatabase(s.Databases), "postgres")
	}
	for _, b := range list {
		dsn := fmt.Sprintf("host=%s port=%s user=postgres dbname=%s", router.QuoteConnValue(host), router.QuoteConnValue(port),
			router.QuoteConnValue(dbOf[b.Source]+"@"+b.Name))
		if len(d.Sources) > 1 {
			dsn += " options=" + router.QuoteConnValue("-c pgbranch.source="+b.Source)
		}
		d.Branches = append(d.Branches, branchRow{Info: b, DSN: dsn})
		d.Sessions += b.Sessions
		d.Owned += b.OwnedBytes
		if b.State == "running" {
			d.Running++
		}
	}
}

// mainDatabase is the database a source's branches are usually used through: the
// first that is not postgres or a template.
func mainDatabase(dbs []string) string {
	for _, db := range dbs {
		if !slices.Contains([]string{"postgres", "template0", "template1"}, db) {
			return db
		}
	}
	return "postgres"
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return roughly(time.Since(t)) + " ago"
}

func until(t *time.Time) string {
	if t == nil {
		return "never"
	}
	d := time.Until(*t)
	if d <= 0 {
		return "due now"
	}
	return "in " + roughly(d)
}

// roughly is a duration to the unit that matters.
func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
